/*
 * skilld exec [--runtime R] [--image I] [--key K] [--timeout MS]
 *             [--memory MIB] [--cpu PCT] [--pids N] [--ro-workspace]
 *             [--output-limit BYTES] -- CMD ARGS...
 * Runs one command in a sandbox with the key's workspace (default key
 * "local") at /workspace and prints the sandbox result JSON. Exit 0 when the
 * command exited 0, 1 otherwise, 2 on usage. A thin client of the runner;
 * like every call, the run leaves an audit row (skill "exec", a digest of
 * the command and its limits) through the engine.
 */
#include "cli/cli.h"
#include "skilld/sandbox.h"
#include "skilld/tenancy.h"
#include "skilld/workspace.h"

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

/* What the audit row's digest covers: the command and how it was run. */
static json_t *audit_input(const struct exec_opts *o, char **argv)
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

static void write_audit(skd_cli *cli, const struct exec_opts *o, char **argv, int ok,
                        const char *code, int64_t started)
{
    skd_err err = {0};
    json_t *in = audit_input(o, argv);
    if (skd_engine_audit_run(cli->engine, o->key, in, ok, code, skd_mono_ms() - started, NULL,
                             &err))
        fprintf(stderr, "skilld exec: audit row not written: %s\n", skd_err_msg(&err));
    json_decref(in);
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
    /* The runner and the store (for the audit row); no skills. */
    cli->one_run = 1;
    if (!skd__cli_engine_flags(cli, SKD_ENGINE_NO_SKILLS))
        return CLI_FAIL;
    skd_workspace *ws = NULL;
    skd_runner *r = skd_engine_runner(cli->engine, &err);
    if (!r || skd_workspace_open(skd_config_str(cli->cfg, "DATA_DIR"), o.key, &ws, &err)) {
        fprintf(stderr, "skilld exec: %s\n", skd_err_msg(&err));
        return CLI_FAIL;
    }
    skd_sandbox_spec spec = {
        .runtime = o.runtime,
        .image = o.image,
        .argv = (const char *const *)argv + o.cmd_at,
        .config = &o.cfg,
        .workspace = skd_workspace_path(ws),
        .key_id = o.key,
    };
    skd_sandbox_result res;
    int64_t started = skd_mono_ms();
    rc = skd_sandbox_run(r, &spec, &res, &err);
    skd_workspace_close(ws);
    /* The only run is over: the spawner tears down while the audit row is
     * written (main's skd_engine_close waits for it). */
    skd_runner_stop(r);
    if (rc) {
        write_audit(cli, &o, argv, 0, skd_errcode(rc), started);
        fprintf(stderr, "skilld exec: %s\n", skd_err_msg(&err));
        json_t *j = json_pack("{s:{s:s, s:s}}", "error", "code", skd_errcode(rc), "message",
                              skd_err_msg(&err));
        skd__cli_print_json(j);
        json_decref(j);
        return CLI_FAIL;
    }
    json_t *j = skd_sandbox_result_to_json(&res);
    skd__cli_print_json(j);
    json_decref(j);
    int ok = !res.error && res.exited && res.exit_code == 0;
    write_audit(cli, &o, argv, ok,
                ok              ? NULL
                : res.error     ? skd_errcode(res.error)
                : res.timed_out ? skd_errcode(SKD_ETIMEOUT)
                                : skd_errcode(SKD_ECOMMAND),
                started);
    skd_sandbox_result_free(&res);
    return ok ? CLI_OK : CLI_FAIL;
}
