/*
 * eval_code (sandbox mode): evaluate a snippet of JavaScript (node),
 * Python (python3) or shell (sh) in the caller's sandbox. The code is fed
 * on the interpreter's standard input, never through a shell command line,
 * so its size is bounded only by the schema. Input: {code, language, image?,
 * timeoutMs?, networkEnabled?}. Result: as execute_command (networkEnabled
 * needs the operator's SKILLS_SANDBOX_NETWORK_ENABLED; docs/egress.md).
 *
 * With sandboxId (one of the caller's live sandboxes) and context (a name,
 * default "default"), Python or JavaScript code runs instead in that
 * context's long-lived interpreter inside the sandbox, whose state persists
 * across calls (src/sandbox/interp.c, include/skilld/interp.h).
 */
#include "builtins/builtins.h"
#include "builtins/sandbox_skill.h"
#include "skilld/interp.h"
#include "skilld/sandbox.h"

#include <string.h>

static const char schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false,"
    " \"required\": [\"code\", \"language\"],"
    " \"properties\": {"
    "  \"code\": {\"type\": \"string\", \"maxLength\": 1048576},"
    "  \"language\": {\"type\": \"string\", \"enum\": [\"javascript\", \"python\", \"sh\"]},"
    "  \"image\": {\"type\": \"string\", \"maxLength\": 256},"
    "  \"sandboxId\": {\"type\": \"string\", \"maxLength\": 64,"
    "                 \"description\": \"run in an interpreter context of this live sandbox "
    "(sandbox_create): its variables, imports and functions persist across calls\"},"
    "  \"context\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 64,"
    "               \"description\": \"with sandboxId: the context's name (A-Z a-z 0-9 _ -), "
    "default 'default'\"}"
    "}}";

/* eval_code with sandboxId: the code runs in a context of the live
 * sandbox (the sandbox's image, limits and network). */
static json_t *in_context(const skd_ctx *ctx, const json_t *input, const char *sandbox_id)
{
    if (json_object_get(input, "image") || json_object_get(input, "networkEnabled"))
        return skd_result_error(SKD_EINVAL,
                                "image and networkEnabled are the live sandbox's: leave them out "
                                "with sandboxId");
    skd_err err = {0};
    skd_runner *r = ctx->runner(ctx, &err);
    if (!r)
        return skd_result_from_err(&err);
    const json_t *code = json_object_get(input, "code");
    skd_live_eval_opts o = {
        .language = skd_json_str(input, "language", ""),
        .context = skd_json_str(input, "context", NULL),
        .code = json_string_value(code),
        .code_len = json_string_length(code),
        .timeout_ms = skd_json_int(input, "timeoutMs", 0),
        .cancel = ctx->cancel,
        .usage = ctx->usage,
    };
    json_t *out = NULL;
    if (skd_live_eval(r, ctx->key_id, sandbox_id, &o, &out, &err) != 0)
        return skd_result_from_err(&err);
    return out;
}

static json_t *handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    const char *sandbox_id = skd_json_str(input, "sandboxId", NULL);
    if (sandbox_id)
        return in_context(ctx, input, sandbox_id);
    if (json_object_get(input, "context"))
        return skd_result_error(SKD_EINVAL, "context needs a sandboxId (a live sandbox)");
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
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description =
        "Evaluate JavaScript, Python or shell code in an isolated sandbox with the "
        "caller's workspace at /workspace; returns exit code and output. With sandboxId "
        "(a live sandbox) and context, Python and JavaScript run in a persistent "
        "interpreter: variables, imports and functions survive across calls, and a "
        "final expression's value comes back as result.";
    d->input_schema = skd__sandbox_skill_schema(schema);
    d->mode = SKD_MODE_SANDBOX;
    d->handler = handler;
}
