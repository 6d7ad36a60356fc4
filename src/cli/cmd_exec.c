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

/* Parse an integer flag value into *out within [lo, hi]. */
static int int_flag(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (skd_parse_i64(v, lo, hi, out))
        return skd__cli_usage("exec", "%s expects an integer in [%lld, %lld]", flag, (long long)lo,
                              (long long)hi);
    return 0;
}

static int parse(int argc, char **argv, struct exec_opts *o)
{
    static const char *const valued[] = {"--runtime", "--image", "--key",  "--timeout",
                                         "--memory",  "--cpu",   "--pids", "--output-limit"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            o->cmd_at = i + 1;
            return o->cmd_at < argc ? 0 : skd__cli_usage("exec", "no command after --");
        }
        if (strcmp(a, "--ro-workspace") == 0) {
            o->cfg.workspace_read_only = 1;
            continue;
        }
        int known = 0;
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
        int rc = 0;
        if (strcmp(a, "--runtime") == 0)
            o->runtime = v;
        else if (strcmp(a, "--image") == 0)
            o->image = v;
        else if (strcmp(a, "--key") == 0)
            o->key = v;
        else if (strcmp(a, "--timeout") == 0)
            rc = int_flag(a, v, 1, SKD_SANDBOX_MAX_TIMEOUT_MS, &o->cfg.timeout_ms);
        else if (strcmp(a, "--memory") == 0)
            rc = int_flag(a, v, SKD_SANDBOX_MIN_MEMORY_MB, 1048576, &o->cfg.memory_limit);
        else if (strcmp(a, "--cpu") == 0)
            rc = int_flag(a, v, 1, 102400, &o->cfg.cpu_limit);
        else if (strcmp(a, "--pids") == 0)
            rc = int_flag(a, v, 1, SKD_SANDBOX_MAX_PIDS, &o->cfg.pids_limit);
        else
            rc = int_flag(a, v, 0, 1LL << 30, &o->cfg.output_limit);
        if (rc)
            return rc;
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
