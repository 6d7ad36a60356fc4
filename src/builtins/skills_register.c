/*
 * skills_register: a skill that registers a command skill from a manifest
 * (or a SKILL.md bundle from a base64 tar archive, bundleTar),
 * so every transport gets registration for free (it is the MCP tool
 * skills_register, and reachable over REST /v1/execute and A2A too). It
 * acts for the calling key with the key's scopes, exactly as POST
 * /v1/skills does: private to the key, or global for skills:admin.
 * It reaches the custom-skills part (src/skills/) through the context's
 * skills object.
 */
#include "builtins/builtins.h"
#include "builtins/fileskill.h"
#include "skilld/bundle.h"
#include "skilld/custom.h"
#include "skilld/json.h"

#include <stdlib.h>

/* {bundleTar}: a SKILL.md bundle as a base64 tar archive. */
static json_t *register_tar(const skd_ctx *ctx, const json_t *input, const skd_actor *who)
{
    skd_err err = {0};
    skd_skill *s = NULL;
    json_t *name = NULL;
    const json_t *b64 = json_object_get(input, "bundleTar");
    unsigned char *tar = NULL;
    size_t len = 0;
    if (skd__base64_decode(json_string_value(b64), json_string_length(b64), SKD_BUNDLE_MAX_BYTES,
                           &tar, &len, &err))
        return skd_result_from_err(&err);
    int rc = skd_bundle_import_tar(ctx->skills, who, tar, len, skd_json_bool(input, "replace", 0),
                                   &s, &name, &err);
    free(tar);
    if (rc)
        return skd_result_from_err(&err);
    json_t *r = skd_result_ok();
    if (r) {
        json_object_set_new(r, "bundle", name);
        json_object_set_new(r, "skill", s ? skd_skill_to_json(s) : json_null());
    } else {
        json_decref(name);
    }
    skd_skill_unref(s);
    return r;
}

static json_t *skills_register(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    skd_skill *s = NULL;
    skd_actor who = {.key_id = ctx->key_id, .scopes = ctx->scopes};
    int has_m = json_object_get(input, "manifest") != NULL;
    if (has_m == (json_object_get(input, "bundleTar") != NULL))
        return skd_result_error(SKD_EINVAL, "give either manifest or bundleTar");
    if (!has_m)
        return register_tar(ctx, input, &who);
    if (skd_custom_register(ctx->skills, &who, json_object_get(input, "manifest"),
                            skd_json_bool(input, "replace", 0), &s, &err))
        return skd_result_from_err(&err);
    json_t *r = skd_result_ok();
    if (r && s)
        json_object_set_new(r, "skill", skd_skill_to_json(s));
    skd_skill_unref(s);
    return r;
}

void skd__builtin_skills_register_def(skd_skill_def *d)
{
    d->name = "skills_register";
    d->version = "1.0.0";
    d->description = "Register a command skill from a manifest, or a SKILL.md bundle from a "
                     "tar archive; it is visible at once to this key (to every key when "
                     "registered with skills:admin).";
    d->input_schema =
        json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s, s:i}, s:{s:s, s:s}}, s:b}", "type", "object",
                  "properties", "manifest", "type", "object", "description",
                  "{name, version, description, inputSchema, outputSchema?, tags?, run: {image?, "
                  "command[], stdin?, timeoutMs?, memoryLimit?, cpuLimit?, networkEnabled?}}",
                  "bundleTar", "type", "string", "description",
                  "a SKILL.md bundle: a tar archive (SKILL.md at its root or in one folder), "
                  "base64; served over MCP as a skill, callable when it has an entry script",
                  "maxLength", (int)(SKD_BUNDLE_MAX_BYTES / 3 * 4 + 4), "replace", "type",
                  "boolean", "description",
                  "replace this key's own skill of the same name@version (or bundle of the "
                  "same name)",
                  "additionalProperties", 0);
    d->mode = SKD_MODE_DIRECT;
    d->handler = skills_register;
}
