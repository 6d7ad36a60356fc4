/*
 * execute_command (sandbox mode): run a program with arguments in the
 * caller's sandbox, with the caller's workspace at /workspace. No shell is
 * involved: command is the program (searched in PATH inside the sandbox)
 * and args are its arguments; use command "sh" with args ["-c", "..."] for
 * a shell. Input: {command, args[], image?, stdin?, env?, timeoutMs?,
 * networkEnabled?}. Result: OmniRoute's fields (success, exitCode, stdout,
 * stderr, output, truncated, durationMs, killed) plus timedOut, oomKilled,
 * signal. timeoutMs defaults to SKILLS_SANDBOX_TIMEOUT_MS; one above the
 * operator's SKILLS_SANDBOX_MAX_TIMEOUT_MS is refused (invalid_input), and
 * networkEnabled true needs SKILLS_SANDBOX_NETWORK_ENABLED (else forbidden).
 */
#include "builtins/builtins.h"
#include "builtins/sandbox_skill.h"
#include "skilld/sandbox.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 1024

static const char schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"command\"],"
    " \"properties\": {"
    "  \"command\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 4096,"
    "               \"description\": \"program to run (PATH is searched); no shell\"},"
    "  \"args\": {\"type\": \"array\", \"maxItems\": 1024,"
    "            \"items\": {\"type\": \"string\", \"maxLength\": 131072}},"
    "  \"image\": {\"type\": \"string\", \"maxLength\": 256,"
    "             \"description\": \"sandbox image (default host)\"},"
    "  \"stdin\": {\"type\": \"string\", \"maxLength\": 1048576},"
    "  \"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}"
    "}}";

static json_t *handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    const json_t *args = json_object_get(input, "args");
    size_t n = json_is_array(args) ? json_array_size(args) : 0;
    if (n > MAX_ARGS)
        return skd_result_error(SKD_EINVAL, "args: at most %d", MAX_ARGS);
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
    const json_t *net = json_object_get(input, "networkEnabled");
    skd__sbx_call call = {
        .argv = argv,
        .env = json_object_get(input, "env"),
        .image = skd_json_str(input, "image", NULL),
        .stdin_data = json_string_value(in),
        .stdin_len = json_is_string(in) ? json_string_length(in) : 0,
        .timeout_ms = skd_json_int(input, "timeoutMs", 0),
        .network_enabled = json_is_boolean(net) ? json_is_true(net) : -1,
    };
    json_t *res = skd__sandbox_skill_run(ctx, &call);
    free(argv);
    return res;
}

void skd__builtin_execute_command_def(skd_skill_def *d)
{
    d->name = "execute_command";
    d->version = "1.0.0";
    d->description = "Run a command in an isolated sandbox (no network by default) with the "
                     "caller's workspace at /workspace; returns exit code and output.";
    d->input_schema = skd__sandbox_skill_schema(schema);
    d->mode = SKD_MODE_SANDBOX;
    d->handler = handler;
}
