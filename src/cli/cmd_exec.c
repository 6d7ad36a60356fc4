/*
 * skilld exec [--runtime R] [--image I] [--key K] [--timeout MS]
 *             [--memory MIB] [--cpu PCT] [--pids N] [--ro-workspace]
 *             [--output-limit BYTES] -- CMD ARGS...
 * Runs one command in a sandbox with the key's workspace (default key
 * "local") at /workspace and prints the sandbox result JSON. Exit 0 when the
 * command exited 0, 1 otherwise, 2 on usage. A transport like the others:
 * it translates the flags into the input of the exec skill
 * (src/builtins/exec.c) and calls it through skd_engine_execute, which
 * runs it and writes its audit row (skill "exec", a digest of the command
 * and its limits).
 */
#include "builtins/builtins.h"
#include "cli/cli.h"
#include "skilld/sandbox.h"

#include <string.h>

struct exec_opts {
    const char *runtime, *image, *key;
    skd_sandbox_config cfg;
    int cmd_at;
};

/* The limit row whose exec flag is a, or NULL. */
static const skd_limit *limit_flag(const char *a)
{
    for (int i = 0; i < SKD_LIMIT_N; i++)
        if (skd_limits[i].flag && strcmp(skd_limits[i].flag, a) == 0)
            return &skd_limits[i];
    return NULL;
}

static int parse(int argc, char **argv, struct exec_opts *o)
{
    static const char *const valued[] = {"--runtime", "--image", "--key"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            o->cmd_at = i + 1;
            return o->cmd_at < argc ? 0 : skd__cli_usage("exec", "no command after --");
        }
        /* A limit's flag (include/skilld/limits.h): a BOOL one takes no value. */
        const skd_limit *l = limit_flag(a);
        if (l && l->kind == SKD_LIMIT_BOOL) {
            skd_limit_set(&o->cfg, (int)(l - skd_limits), 1);
            continue;
        }
        int known = l != NULL;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            known |= strcmp(a, valued[k]) == 0;
        if (!known) {
            if (a[0] != '-') {
                o->cmd_at = i;
                return 0;
            }
            return skd__cli_usage("exec", "unknown flag %s", a);
        }
        if (i + 1 >= argc)
            return skd__cli_usage("exec", "%s needs a value", a);
        const char *v = argv[++i];
        int64_t n;
        if (l) {
            if (skd_parse_i64(v, l->min, l->max, &n))
                return skd__cli_usage("exec", "%s expects an integer in [%lld, %lld]", a,
                                      (long long)l->min, (long long)l->max);
            skd_limit_set(&o->cfg, (int)(l - skd_limits), n);
        } else if (strcmp(a, "--runtime") == 0) {
            o->runtime = v;
        } else if (strcmp(a, "--image") == 0) {
            o->image = v;
        } else {
            o->key = v;
        }
    }
    return skd__cli_usage("exec", "name the command to run after --");
}

/* The exec skill's input (src/builtins/exec.c): the command and every
 * limit it runs with, which the audit row's digest covers. */
static json_t *exec_input(const struct exec_opts *o, char **argv)
{
    json_t *args = json_array();
    for (int i = o->cmd_at; args && argv[i]; i++)
        json_array_append_new(args, json_string(argv[i]));
    return json_pack("{s:o?, s:s?, s:s?, s:I, s:I, s:I, s:I, s:I, s:b}", "argv", args, "runtime",
                     o->runtime, "image", o->image, "timeout", (json_int_t)o->cfg.timeout_ms,
                     "memory", (json_int_t)o->cfg.memory_limit, "cpu", (json_int_t)o->cfg.cpu_limit,
                     "pids", (json_int_t)o->cfg.pids_limit, "outputLimit",
                     (json_int_t)o->cfg.output_limit, "workspaceReadOnly",
                     o->cfg.workspace_read_only);
}

/* The engine's exec skill, in this one-call engine only. */
static int add_exec_skill(skd_engine *e, skd_err *err)
{
    skd_skill_def d = {0};
    skd__builtin_exec_def(&d);
    int rc = d.input_schema ? skd_registry_add(skd_engine_registry(e), &d, 0, err)
                            : skd_err_set(err, SKD_ENOMEM, "out of memory");
    json_decref(d.input_schema);
    return rc;
}

int skd__cli_exec(skd_cli *cli, int argc, char **argv)
{
    struct exec_opts o = {.key = "local"};
    skd_sandbox_config_defaults(&o.cfg, cli->cfg);
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    if (!*o.key)
        return skd__cli_usage("exec", "--key must not be empty");
    skd_err err = {0};
    /* The runner and the store (for the audit row); no skills but exec. */
    cli->one_run = 1;
    if (!skd__cli_engine_flags(cli, SKD_ENGINE_NO_SKILLS))
        return CLI_FAIL;
    json_t *input = exec_input(&o, argv);
    if (!input || add_exec_skill(cli->engine, &err)) {
        fprintf(stderr, "skilld exec: %s\n", input ? skd_err_msg(&err) : "out of memory");
        json_decref(input);
        return CLI_FAIL;
    }
    /* The operator's own call, through the one path: the engine runs it,
     * counts it and writes its audit row (and no run row: a one-call
     * engine stops its runner as soon as the run is over). */
    skd_call call = {.key_id = o.key, .scopes = SKD_SCOPE_ALL, .skill = "exec", .input = input};
    json_t *result = skd_engine_execute(cli->engine, &call, NULL);
    json_decref(input);
    int ok = skd_result_success(result);
    const json_t *sandbox = json_object_get(result, "sandbox");
    if (sandbox) {
        skd__cli_print_json(sandbox);
    } else { /* it did not run */
        const json_t *e = json_object_get(result, "error");
        fprintf(stderr, "skilld exec: %s\n", skd_json_str(e, "message", "out of memory"));
        json_t *j = json_pack("{s:O?}", "error", e);
        skd__cli_print_json(j);
        json_decref(j);
    }
    json_decref(result);
    return ok ? CLI_OK : CLI_FAIL;
}
