/*
 * The live sandbox skills (DESIGN.md, "Live sandboxes"): sandbox_create,
 * sandbox_exec, sandbox_list and sandbox_delete. A live sandbox keeps its
 * processes, its /tmp and its limits across calls; the sandbox id is a
 * handle in the arguments, so the skills suit stateless transports as well
 * as sessions. Every transport reaches them through the engine (REST
 * /v1/sandboxes is a translation onto them, src/server/rest_sandboxes.c).
 *
 * The resource and its ownership are src/sandbox/live.c's: a key sees only
 * its own sandboxes, and another key's is not_found. Limits are the
 * sandbox limits table's rows, narrowed by the call, checked against the
 * operator's ceilings there.
 */
#include "builtins/builtins.h"
#include "builtins/sandbox_skill.h"
#include "skilld/log.h"
#include "skilld/sandbox.h"
#include "skilld/store.h"
#include "skilld/workspace.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 1024

/* The limits a create may narrow: rows of include/skilld/limits.h, by
 * their input names. */
static const int create_limits[] = {SKD_LIMIT_MEMORY,  SKD_LIMIT_CPU,     SKD_LIMIT_PIDS,
                                    SKD_LIMIT_NETWORK, SKD_LIMIT_TIMEOUT, SKD_LIMIT_OUTPUT,
                                    SKD_LIMIT_TMP};

static const char create_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false,"
    " \"properties\": {"
    "  \"image\": {\"type\": \"string\", \"maxLength\": 256,"
    "             \"description\": \"sandbox image (default host)\"},"
    "  \"idleTimeoutMs\": {\"type\": \"integer\", \"minimum\": 1000, \"maximum\": 604800000,"
    "                     \"description\": \"end the sandbox after this long without an exec\"},"
    "  \"lifetimeMs\": {\"type\": \"integer\", \"minimum\": 1000, \"maximum\": 604800000,"
    "                  \"description\": \"end the sandbox this long after its creation\"},"
    "  \"onIdle\": {\"type\": \"string\", \"enum\": [\"delete\", \"pause\"],"
    "              \"description\": \"what idleTimeoutMs does: delete (default) or pause "
    "(sandbox_pause)\"}"
    "}}";

const char skd__builtin_sandbox_id_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"sandboxId\"],"
    " \"properties\": {"
    "  \"sandboxId\": {\"type\": \"string\", \"maxLength\": 64,"
    "                 \"description\": \"the id sandbox_create returned\"}"
    "}}";

static const char list_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false,"
    " \"properties\": {"
    "  \"sandboxId\": {\"type\": \"string\", \"maxLength\": 64,"
    "                 \"description\": \"only this one (not_found when it is not yours)\"}"
    "}}";

static const char exec_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false,"
    " \"required\": [\"sandboxId\", \"command\"],"
    " \"properties\": {"
    "  \"sandboxId\": {\"type\": \"string\", \"maxLength\": 64},"
    "  \"command\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 4096,"
    "               \"description\": \"program to run (PATH is searched); no shell\"},"
    "  \"args\": {\"type\": \"array\", \"maxItems\": 1024,"
    "            \"items\": {\"type\": \"string\", \"maxLength\": 131072}},"
    "  \"stdin\": {\"type\": \"string\", \"maxLength\": 1048576},"
    "  \"cwd\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 4096},"
    "  \"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}},"
    "  \"background\": {\"type\": \"boolean\","
    "                  \"description\": \"answer at once with a processId; the process keeps "
    "running after the call (sandbox_processes reads its output)\"}"
    "}}";

static const char processes_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"sandboxId\"],"
    " \"properties\": {"
    "  \"sandboxId\": {\"type\": \"string\", \"maxLength\": 64},"
    "  \"processId\": {\"type\": \"string\", \"maxLength\": 64,"
    "                 \"description\": \"one process, with its output\"},"
    "  \"offset\": {\"type\": \"integer\", \"minimum\": 0,"
    "              \"description\": \"stdout from this byte on\"},"
    "  \"stderrOffset\": {\"type\": \"integer\", \"minimum\": 0},"
    "  \"kill\": {\"type\": \"boolean\", \"description\": \"kill the process\"}"
    "}}";

skd_runner *skd__builtin_runner(const skd_ctx *ctx, json_t **res)
{
    skd_err err = {0};
    skd_runner *r = ctx->runner(ctx, &err);
    if (!r)
        *res = skd_result_from_err(&err);
    return r;
}

int skd__builtin_live_row_begin(const skd_ctx *ctx, char id[SKD_UUID_LEN + 1], skd_err *err)
{
    if (skd_uuid(id))
        return skd_err_set(err, SKD_EINTERNAL, "no randomness for a sandbox id");
    int cap = (int)skd_config_int(ctx->cfg, "SKILLS_SANDBOX_MAX_LIVE_PER_KEY");
    skd_run_req rq = {
        .id = id, .key_id = ctx->key_id, .skill = "sandbox_create", .kind = "live", .per_key = cap};
    int rc = skd_store_run_begin(ctx->store, &rq, err);
    if (rc == SKD_EBUSY) {
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_EBUSY,
                         "this key holds %d live sandboxes over every replica, its cap "
                         "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete or pause one first",
                         cap);
    }
    return rc;
}

void skd__builtin_live_row_end(const skd_ctx *ctx, const char *id)
{
    skd_store_run_end(ctx->store, id, "error");
}

void skd__builtin_live_row_set(const skd_ctx *ctx, const json_t *sb)
{
    skd_err err = {0};
    if (skd_store_live_set(ctx->store, skd_config_str(ctx->cfg, "SKILLD_REPLICA_URL"), sb, &err))
        skd_warn("live sandbox %s: its row was not updated: %s",
                 json_string_value(json_object_get(sb, "id")), skd_err_msg(&err));
}

/* {success: true, sandbox} or {success: true, sandboxes}. */
static json_t *ok_with(const char *name, json_t *v)
{
    json_t *o = skd_result_ok();
    if (!o || !v || json_object_set_new(o, name, v)) {
        json_decref(o);
        return skd_result_error(SKD_ENOMEM, "out of memory");
    }
    return o;
}

static json_t *create_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    skd_sandbox_config cfg;
    skd_sandbox_config_defaults(&cfg, ctx->cfg);
    for (size_t i = 0; i < sizeof(create_limits) / sizeof(create_limits[0]); i++) {
        const skd_limit *l = &skd_limits[create_limits[i]];
        const json_t *v = json_object_get(input, l->mkey);
        if (v) /* typed and ranged by the schema (the row's) */
            skd_limit_set(&cfg, create_limits[i],
                          json_is_boolean(v) ? json_is_true(v) : json_integer_value(v));
    }
    skd_live_opts o = {
        .image = skd_json_str(input, "image", NULL),
        .config = &cfg,
        .workspace = ctx->ws ? skd_workspace_path(ctx->ws) : NULL,
        .idle_timeout_ms = skd_json_int(input, "idleTimeoutMs", 0),
        .lifetime_ms = skd_json_int(input, "lifetimeMs", 0),
        .on_idle_pause = strcmp(skd_json_str(input, "onIdle", "delete"), "pause") == 0,
    };
    skd_err err = {0};
    json_t *sb = NULL;
    char id[SKD_UUID_LEN + 1];
    if (skd__builtin_live_row_begin(ctx, id, &err) != 0)
        return skd_result_from_err(&err);
    o.id = id;
    if (skd_live_create(r, ctx->key_id, &o, &sb, &err) != 0) {
        skd__builtin_live_row_end(ctx, id);
        return skd_result_from_err(&err);
    }
    skd__builtin_live_row_set(ctx, sb);
    return ok_with("sandbox", sb);
}

/* 1 when array a holds an object whose id is id. */
static int listed(const json_t *a, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v) {
        const char *x = json_string_value(json_object_get(v, "id"));
        if (x && strcmp(x, id) == 0)
            return 1;
    }
    return 0;
}

/* The key's sandboxes on this replica (mine, stolen), then those the
 * store has elsewhere, as their rows show them: held by other replicas,
 * or paused and held by none (replica null: any replica resumes it). A
 * store that does not answer leaves only this replica's. */
static json_t *list_everywhere(const skd_ctx *ctx, json_t *mine)
{
    const char *me = skd_store_replica_id(ctx->store);
    size_t i, n;
    json_t *v;
    json_array_foreach (mine, i, v)
        json_object_set_new(v, "replica", json_string(me));
    n = mine ? json_array_size(mine) : 0;
    json_t *rows = mine ? skd_store_live_list(ctx->store, ctx->key_id, NULL) : NULL;
    json_array_foreach (rows, i, v) {
        const char *rep = json_string_value(json_object_get(v, "replica"));
        const char *id = json_string_value(json_object_get(v, "id"));
        json_t *sb = json_object_get(json_object_get(v, "detail"), "sandbox");
        int held = json_is_true(json_object_get(v, "held"));
        if (!rep || !id || !json_is_object(sb) || (n && listed(mine, id)))
            continue; /* ours are listed above, from memory */
        json_t *c = json_deep_copy(sb);
        if (c && json_object_set_new(c, "replica", held ? json_string(rep) : json_null()) == 0)
            json_array_append(mine, c);
        json_decref(c);
    }
    json_decref(rows);
    return mine;
}

static json_t *list_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    const char *id = skd_json_str(input, "sandboxId", NULL);
    if (id) {
        skd_err err = {0};
        json_t *sb = NULL;
        if (skd_live_get(r, ctx->key_id, id, &sb, &err) != 0)
            return skd_result_from_err(&err);
        return ok_with("sandbox", sb);
    }
    return ok_with("sandboxes", list_everywhere(ctx, skd_live_list(r, ctx->key_id)));
}

static json_t *delete_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    json_t *egress = NULL;
    const char *id = skd_json_str(input, "sandboxId", "");
    if (skd_live_delete_egress(r, ctx->key_id, id, &egress, &err) != 0)
        return skd_result_from_err(&err);
    /* networkEnabled: what its proxy did since the last exec, metered and
     * recorded with this call (the engine's audit row takes "egress"). */
    if (egress && ctx->usage)
        ctx->usage->egress_bytes += skd_sandbox_egress_bytes(egress);
    json_t *o = skd_result_ok();
    if (o) {
        json_object_set_new(o, "sandboxId", json_string(id));
        if (egress)
            json_object_set(o, "egress", egress);
    }
    json_decref(egress);
    return o;
}

/* sandbox_exec with background: true. */
static json_t *background(const skd_ctx *ctx, const json_t *input, const char **argv,
                          const char *in, size_t in_len, const char *cwd)
{
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    char **env = NULL;
    if ((res = skd__sandbox_skill_env(json_object_get(input, "env"), &env)) != NULL)
        return res;
    skd_sandbox_spec spec = {
        .argv = argv,
        .env = (const char *const *)env,
        .stdin_data = in,
        .stdin_len = in_len,
        .cwd = cwd,
    };
    skd_live_exec_opts o = {.spec = &spec};
    char pid[SKD_UUID_LEN + 1];
    skd_err err = {0};
    const char *id = skd_json_str(input, "sandboxId", "");
    int rc = skd_live_exec_background(r, ctx->key_id, id, &o, pid, &err);
    skd__sandbox_skill_env_free(env);
    if (rc)
        return skd_result_from_err(&err);
    json_t *o2 = skd_result_ok();
    if (o2) {
        json_object_set_new(o2, "processId", json_string(pid));
        json_object_set_new(o2, "sandboxId", json_string(id));
    }
    return o2;
}

static json_t *processes_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    const char *id = skd_json_str(input, "sandboxId", "");
    const char *pid = skd_json_str(input, "processId", NULL);
    if (json_is_true(json_object_get(input, "kill"))) {
        if (!pid)
            return skd_result_error(SKD_EINVAL, "kill: name the processId");
        if (skd_live_kill(r, ctx->key_id, id, pid, &err) != 0)
            return skd_result_from_err(&err);
        json_t *o = skd_result_ok();
        if (o)
            json_object_set_new(o, "processId", json_string(pid));
        return o;
    }
    json_t *v = NULL;
    if (skd_live_processes(r, ctx->key_id, id, pid, skd_json_int(input, "offset", 0),
                           skd_json_int(input, "stderrOffset", 0), &v, &err) != 0)
        return skd_result_from_err(&err);
    return ok_with(pid ? "process" : "processes", v);
}

static json_t *exec_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    const json_t *args = json_object_get(input, "args");
    size_t n = json_is_array(args) ? json_array_size(args) : 0;
    if (n > MAX_ARGS)
        return skd_result_error(SKD_EINVAL, "args: at most %d", MAX_ARGS);
    const char *cwd = skd_json_str(input, "cwd", NULL);
    if (cwd && cwd[0] != '/')
        return skd_result_error(SKD_EINVAL, "cwd must be an absolute path");
    const char **argv = calloc(n + 2, sizeof(*argv));
    if (!argv)
        return skd_result_error(SKD_ENOMEM, "out of memory");
    argv[0] = skd_json_str(input, "command", "");
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(args, i);
        if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
            free(argv);
            return skd_result_error(SKD_EINVAL, "args[%zu] must be a string without NUL", i);
        }
        argv[i + 1] = json_string_value(a);
    }
    const json_t *in = json_object_get(input, "stdin");
    if (json_is_true(json_object_get(input, "background"))) {
        json_t *res = background(ctx, input, argv, json_string_value(in),
                                 json_is_string(in) ? json_string_length(in) : 0, cwd);
        free(argv);
        return res;
    }
    skd__sbx_call call = {
        .argv = argv,
        .env = json_object_get(input, "env"),
        .stdin_data = json_string_value(in),
        .stdin_len = json_is_string(in) ? json_string_length(in) : 0,
        .timeout_ms = skd_json_int(input, "timeoutMs", 0),
        .network_enabled = -1,
        .live_id = skd_json_str(input, "sandboxId", ""),
        .cwd = cwd,
    };
    json_t *res = skd__sandbox_skill_run(ctx, &call);
    free(argv);
    return res;
}

static json_t *with_limits(const char *text, const int *rows, size_t n)
{
    json_t *s = json_loads(text, 0, NULL);
    for (size_t i = 0; i < n && s; i++)
        s = skd_sandbox_limit_schema(s, rows[i]);
    return s;
}

void skd__builtin_sandbox_create_def(skd_skill_def *d)
{
    d->name = "sandbox_create";
    d->version = "1.0.0";
    d->description = "Create a live sandbox that keeps its processes, /tmp and limits across "
                     "calls (the caller's workspace at /workspace); returns its id for "
                     "sandbox_exec. It ends on sandbox_delete, after idleTimeoutMs without an "
                     "exec, or after lifetimeMs.";
    d->input_schema =
        with_limits(create_schema, create_limits, sizeof(create_limits) / sizeof(create_limits[0]));
    d->mode = SKD_MODE_DIRECT;
    d->handler = create_handler;
}

void skd__builtin_sandbox_exec_def(skd_skill_def *d)
{
    static const int rows[] = {SKD_LIMIT_TIMEOUT};
    d->name = "sandbox_exec";
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description = "Run a command in one of your live sandboxes (from sandbox_create); "
                     "returns exit code and output as execute_command does.";
    d->input_schema = with_limits(exec_schema, rows, 1);
    d->mode = SKD_MODE_SANDBOX;
    d->handler = exec_handler;
}

void skd__builtin_sandbox_list_def(skd_skill_def *d)
{
    d->name = "sandbox_list";
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description = "List your live sandboxes (or one, by sandboxId) with their limits and "
                     "when they end.";
    d->input_schema = json_loads(list_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = list_handler;
}

void skd__builtin_sandbox_delete_def(skd_skill_def *d)
{
    d->name = "sandbox_delete";
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description = "End one of your live sandboxes: every process of it is killed and its "
                     "files in /tmp are gone.";
    d->input_schema = json_loads(skd__builtin_sandbox_id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = delete_handler;
}

void skd__builtin_sandbox_processes_def(skd_skill_def *d)
{
    d->name = "sandbox_processes";
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description = "The background processes of one of your live sandboxes (sandbox_exec "
                     "with background: true); with processId, that one and its output from "
                     "offset; with kill: true, kill it and all it started.";
    d->input_schema = json_loads(processes_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = processes_handler;
}
