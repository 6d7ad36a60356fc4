/*
 * skills_register: a skill that registers a command skill from a manifest,
 * so every transport gets registration for free (it is the MCP tool
 * skills_register, and reachable over REST /v1/execute and A2A too). It
 * acts for the calling key with the key's scopes, exactly as POST
 * /v1/skills does: private to the key, or global for skills:admin.
 * Registered by skd__custom_load, not in the built-ins list, because it
 * belongs to the custom-skills part.
 */
#include "skilld/custom.h"
#include "skilld/json.h"

static json_t *skills_register(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    skd_skill *s = NULL;
    skd_actor who = {.key_id = ctx->key_id, .scopes = ctx->scopes};
    if (skd_custom_register(ctx->engine, &who, json_object_get(input, "manifest"),
                            skd_json_bool(input, "replace", 0), &s, &err))
        return skd_result_from_err(&err);
    json_t *r = skd_result_ok();
    if (r && s)
        json_object_set_new(r, "skill", skd_skill_to_json(s));
    skd_skill_unref(s);
    return r;
}

int skd__skills_register_add(skd_registry *reg, skd_err *err)
{
    json_t *schema =
        json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s], s:b}", "type", "object",
                  "properties", "manifest", "type", "object", "description",
                  "{name, version, description, inputSchema, outputSchema?, tags?, run: {image?, "
                  "command[], stdin?, timeoutMs?, memoryLimit?, cpuLimit?, networkEnabled?}}",
                  "replace", "type", "boolean", "description",
                  "replace this key's own skill of the same name@version", "required", "manifest",
                  "additionalProperties", 0);
    skd_skill_def d = {
        .name = "skills_register",
        .version = "1.0.0",
        .description = "Register a command skill from a manifest; it runs in the sandbox and is "
                       "visible at once to this key (to every key when registered with "
                       "skills:admin).",
        .input_schema = schema,
        .mode = SKD_MODE_DIRECT,
        .handler = skills_register,
    };
    int rc = schema ? skd_registry_add(reg, &d, 0, err) : skd_err_set(err, SKD_ENOMEM, "oom");
    json_decref(schema);
    return rc;
}
