/*
 * skill_run: run a script a SKILL.md bundle ships (scripts/...) in the
 * caller's sandbox, the bundle mounted read-only at /skill and the caller's
 * workspace at /workspace. Input {skill, script, args[], stdin?,
 * timeoutMs?}; the result is execute_command's (exitCode, stdout, stderr,
 * ...), and the run gets exactly its limits, ceilings and network rule:
 * both go through skd__sandbox_skill_run, and networkEnabled is never
 * taken from the input (the operator's default holds).
 *
 * Who sees which bundle is skd_bundle_list's decision (the caller's own and
 * the public ones). The script must be a file of the bundle's record under
 * scripts/, and its bytes must still match the recorded digest when the run
 * starts (a changed bundle is registered again and the run refused).
 */
#include "builtins/builtins.h"
#include "builtins/sandbox_skill.h"
#include "skilld/bundle.h"
#include "skilld/custom.h"
#include "skilld/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 256

static const char schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"skill\", \"script\"],"
    " \"properties\": {"
    "  \"skill\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 64,"
    "             \"description\": \"the bundle's name (skills/list)\"},"
    "  \"script\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 1024,"
    "              \"description\": \"path inside the bundle, e.g. scripts/run.py\"},"
    "  \"args\": {\"type\": \"array\", \"maxItems\": 256,"
    "            \"items\": {\"type\": \"string\", \"maxLength\": 131072}},"
    "  \"stdin\": {\"type\": \"string\", \"maxLength\": 1048576},"
    "  \"timeoutMs\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 60000}"
    "}}";

/* The interpreter for a script, by its extension; NULL: run it directly. */
static const char *interpreter(const char *script)
{
    size_t n = strlen(script);
    if (n > 3 && strcmp(script + n - 3, ".py") == 0)
        return "/usr/bin/python3";
    if (n > 3 && strcmp(script + n - 3, ".sh") == 0)
        return "/bin/sh";
    return NULL;
}

static json_t *run(const skd_ctx *ctx, const json_t *input, const json_t *row)
{
    const char *script = skd_json_str(input, "script", "");
    const json_t *args = json_object_get(input, "args");
    size_t n = json_array_size(args), k = 0;
    char path[1100], *data = NULL;
    size_t len = 0;
    skd_err err = {0};
    if (strncmp(script, "scripts/", 8) != 0)
        return skd_result_error(SKD_EINVAL, "script must be a file under scripts/ of the bundle");
    /* The bytes must still be the registered ones (this also refuses a
     * path that is not a file of the bundle). */
    if (skd_bundle_read(ctx->skills, row, script, &data, &len, &err) != 0)
        return skd_result_from_err(&err);
    free(data);
    if (n > MAX_ARGS)
        return skd_result_error(SKD_EINVAL, "args: at most %d", MAX_ARGS);
    const char **argv = calloc(n + 3, sizeof(*argv));
    if (!argv)
        return skd_result_error(SKD_ENOMEM, "out of memory");
    snprintf(path, sizeof(path), "/skill/%s", script);
    if (interpreter(script))
        argv[k++] = interpreter(script);
    argv[k++] = path;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(args, i);
        if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
            free(argv);
            return skd_result_error(SKD_EINVAL, "args[%zu] must be a string without NUL", i);
        }
        argv[k++] = json_string_value(a);
    }
    const json_t *in = json_object_get(input, "stdin");
    skd__sbx_call call = {
        .argv = argv,
        .stdin_data = json_string_value(in),
        .stdin_len = json_is_string(in) ? json_string_length(in) : 0,
        .timeout_ms = skd_json_int(input, "timeoutMs", 0),
        .network_enabled = -1,
        .skill_dir = skd_json_str(row, "dir", NULL),
    };
    json_t *res = skd__sandbox_skill_run(ctx, &call);
    free(argv);
    return res;
}

static json_t *handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    const char *name = skd_json_str(input, "skill", "");
    json_t *rows = skd_bundle_list(ctx->skills, ctx->key_id, name, 0, &err);
    if (!rows)
        return skd_result_from_err(&err);
    const json_t *row = json_array_get(rows, 0);
    json_t *res =
        row ? run(ctx, input, row)
            : skd_result_error(SKD_ENOENT, "no skill bundle %s visible to this key", name);
    json_decref(rows);
    return res;
}

void skd__builtin_skill_run_def(skd_skill_def *d)
{
    d->name = "skill_run";
    d->version = "1.0.0";
    d->description = "Run a script of a SKILL.md bundle (skills/list) in the sandbox: the bundle "
                     "read-only at /skill, your workspace at /workspace. {skill, script, args?, "
                     "stdin?}";
    d->input_schema = json_loads(schema, 0, NULL);
    d->mode = SKD_MODE_SANDBOX;
    d->handler = handler;
}
