/*
 * eval_code (sandbox mode): evaluate a snippet of JavaScript (node),
 * Python (python3) or shell (sh) in the caller's sandbox. The code is fed
 * on the interpreter's standard input, never through a shell command line,
 * so its size is bounded only by the schema. Input: {code, language, image?,
 * timeoutMs?, networkEnabled?}. Result: as execute_command (networkEnabled
 * needs the operator's SKILLS_SANDBOX_NETWORK_ENABLED; docs/egress.md).
 */
#include "builtins/builtins.h"
#include "builtins/sandbox_skill.h"
#include "skilld/sandbox.h"

#include <string.h>

static const char schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false,"
    " \"required\": [\"code\", \"language\"],"
    " \"properties\": {"
    "  \"code\": {\"type\": \"string\", \"maxLength\": 1048576},"
    "  \"language\": {\"type\": \"string\", \"enum\": [\"javascript\", \"python\", \"sh\"]},"
    "  \"image\": {\"type\": \"string\", \"maxLength\": 256}"
    "}}";

static json_t *handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    static const char *const js[] = {"node", "-", NULL};
    static const char *const py[] = {"python3", "-", NULL};
    static const char *const sh[] = {"sh", "-s", NULL};
    const char *lang = skd_json_str(input, "language", "");
    const char *const *argv = strcmp(lang, "javascript") == 0 ? js
                              : strcmp(lang, "python") == 0   ? py
                              : strcmp(lang, "sh") == 0       ? sh
                                                              : NULL;
    if (!argv)
        return skd_result_error(SKD_EINVAL, "language must be javascript, python or sh");
    const json_t *code = json_object_get(input, "code");
    const json_t *net = json_object_get(input, "networkEnabled");
    skd__sbx_call call = {
        .argv = argv,
        .image = skd_json_str(input, "image", NULL),
        .stdin_data = json_string_value(code),
        .stdin_len = json_string_length(code),
        .timeout_ms = skd_json_int(input, "timeoutMs", 0),
        .network_enabled = json_is_boolean(net) ? json_is_true(net) : -1,
    };
    return skd__sandbox_skill_run(ctx, &call);
}

void skd__builtin_eval_code_def(skd_skill_def *d)
{
    d->name = "eval_code";
    d->version = "1.0.0";
    d->description = "Evaluate JavaScript, Python or shell code in an isolated sandbox with the "
                     "caller's workspace at /workspace; returns exit code and output.";
    d->input_schema = skd__sandbox_skill_schema(schema);
    d->mode = SKD_MODE_SANDBOX;
    d->handler = handler;
}
