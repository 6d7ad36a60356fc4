/*
 * Command-skill manifests: the checker every registration path goes through
 * (REST, MCP skills_register, the command line, the store at start-up).
 *
 * A manifest comes from a client, so nothing in it is trusted: every field
 * has a type, a bound and a path in the error message, and unknown fields
 * are refused so that a typo ("timeout" for "timeoutMs") is an error rather
 * than a silently ignored limit. The image must be "host" or one listed in
 * SKILLS_ALLOWED_SANDBOX_IMAGES.
 */
#include "skilld/custom.h"
#include "skilld/image.h"
#include "skilld/json.h"
#include "skilld/sandbox.h"
#include "skilld/util.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define DESC_MAX 4096
#define TAGS_MAX 32
#define TAG_MAX 64
#define ARGS_MAX 256
#define ARG_MAX 4096
#define IMAGE_MAX 256

static int bad(skd_err *err, const char *path, const char *what)
{
    return skd_err_set(err, SKD_EINVAL, "manifest.%s: %s", path, what);
}

/* Every key of obj must be in allowed (NULL-terminated). */
static int only_keys(const json_t *obj, const char *prefix, const char *const *allowed,
                     skd_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)obj, k, v) {
        size_t i;
        for (i = 0; allowed[i]; i++)
            if (strcmp(k, allowed[i]) == 0)
                break;
        if (!allowed[i])
            return skd_err_set(err, SKD_EINVAL, "manifest%s%.*s: unknown field", prefix,
                               (int)(strlen(k) > 64 ? 64 : strlen(k)), k);
    }
    return 0;
}

static int check_string(const json_t *obj, const char *key, const char *path, int required,
                        size_t max, skd_err *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return required ? bad(err, path, "is required") : 0;
    if (!json_is_string(v))
        return bad(err, path, "must be a string");
    size_t n = json_string_length(v);
    if (required && n == 0)
        return bad(err, path, "must not be empty");
    if (n > max) {
        char msg[64];
        snprintf(msg, sizeof(msg), "is longer than %zu bytes", max);
        return bad(err, path, msg);
    }
    return 0;
}

static int check_tags(const json_t *tags, skd_err *err)
{
    if (!tags)
        return 0;
    if (!json_is_array(tags))
        return bad(err, "tags", "must be an array of strings");
    if (json_array_size(tags) > TAGS_MAX)
        return bad(err, "tags", "has more than 32 entries");
    size_t i;
    json_t *t;
    json_array_foreach (tags, i, t) {
        if (!json_is_string(t) || json_string_length(t) == 0 || json_string_length(t) > TAG_MAX)
            return skd_err_set(err, SKD_EINVAL,
                               "manifest.tags[%zu]: must be a string of 1 to 64 bytes", i);
    }
    return 0;
}

static int check_schema(const json_t *m, const char *key, int required, skd_err *err)
{
    json_t *s = json_object_get(m, key);
    skd_err inner = {0};
    if (!s)
        return required ? bad(err, key, "is required") : 0;
    if (!json_is_object(s))
        return bad(err, key, "must be a JSON Schema object");
    if (strcmp(key, "inputSchema") == 0) {
        json_t *type = json_object_get(s, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "object") != 0)
            return bad(err, "inputSchema.type", "must be \"object\" (a skill takes an object)");
    }
    if (skd_schema_check(s, &inner))
        return skd_err_set(err, SKD_EINVAL, "manifest.%s: %s", key, skd_err_msg(&inner));
    return 0;
}

/* "host", or an image reference allowed by SKILLS_ALLOWED_SANDBOX_IMAGES
 * (the naming and allow-list rules are the image store's: one copy). That
 * it is imported is checked when a client registers (skd_custom_register),
 * not here, so a stored skill stays loadable while its image is re-imported. */
static int check_image(const char *image, const skd_config *cfg, skd_err *err)
{
    skd_image_ref ref;
    skd_err inner = {0};
    if (strcmp(image, SKD_IMAGE_HOST) == 0)
        return 0;
    if (skd_image_parse_ref(image, &ref, &inner))
        return skd_err_set(err, SKD_EINVAL, "manifest.run.image: %s", skd_err_msg(&inner));
    if (!skd_image_allowed(cfg ? skd_config_str(cfg, "SKILLS_ALLOWED_SANDBOX_IMAGES") : "", image))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "manifest.run.image: \"%s\" is not allowed (use host or one of "
                           "SKILLS_ALLOWED_SANDBOX_IMAGES)",
                           image);
    return 0;
}

static int check_command(const json_t *cmd, skd_err *err)
{
    if (!cmd)
        return bad(err, "run.command", "is required");
    if (!json_is_array(cmd) || json_array_size(cmd) == 0)
        return bad(err, "run.command", "must be a non-empty array of strings");
    if (json_array_size(cmd) > ARGS_MAX)
        return bad(err, "run.command", "has more than 256 arguments");
    size_t i;
    json_t *a;
    json_array_foreach (cmd, i, a) {
        if (!json_is_string(a) || json_string_length(a) > ARG_MAX ||
            (i == 0 && json_string_length(a) == 0))
            return skd_err_set(err, SKD_EINVAL,
                               "manifest.run.command[%zu]: must be a string of at most 4096 "
                               "bytes%s",
                               i, i == 0 ? ", not empty" : "");
        if (strlen(json_string_value(a)) != json_string_length(a))
            return skd_err_set(err, SKD_EINVAL, "manifest.run.command[%zu]: contains NUL", i);
    }
    return 0;
}

/* Every key of run is one of keys (NULL-terminated) or the manifest key of
 * a sandbox limit (include/skilld/limits.h). */
static int only_run_keys(const json_t *run, const char *const *keys, skd_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)run, k, v) {
        size_t i;
        for (i = 0; keys[i] && strcmp(k, keys[i]) != 0; i++)
            ;
        if (!keys[i] && !skd_limit_by_key(k, 1))
            return skd_err_set(err, SKD_EINVAL, "manifest.run.%.*s: unknown field",
                               (int)(strlen(k) > 64 ? 64 : strlen(k)), k);
    }
    return 0;
}

/* The limits a manifest sets, each within its row's range. */
static int check_limits(const json_t *run, skd_err *err)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        json_t *v = l->mkey ? json_object_get(run, l->mkey) : NULL;
        if (!v)
            continue;
        if (l->kind == SKD_LIMIT_BOOL && !json_is_boolean(v))
            return skd_err_set(err, SKD_EINVAL, "manifest.run.%s: must be true or false", l->mkey);
        if (l->kind == SKD_LIMIT_INT && (!json_is_integer(v) || json_integer_value(v) < l->min ||
                                         json_integer_value(v) > l->max))
            return skd_err_set(err, SKD_EINVAL,
                               "manifest.run.%s: must be an integer in [%lld, %lld]", l->mkey,
                               (long long)l->min, (long long)l->max);
    }
    return 0;
}

static int check_run(const json_t *run, const skd_config *cfg, skd_err *err)
{
    static const char *const keys[] = {"image",           "command", "stdin", "egressAllowHosts",
                                       "egressDenyHosts", NULL};
    int rc;
    if (!run)
        return bad(err, "run", "is required");
    if (!json_is_object(run))
        return bad(err, "run", "must be an object");
    if ((rc = only_run_keys(run, keys, err)) != 0)
        return rc;
    if ((rc = check_string(run, "image", "run.image", 0, IMAGE_MAX, err)) != 0)
        return rc;
    if ((rc = check_image(skd_json_str(run, "image", "host"), cfg, err)) != 0)
        return rc;
    if ((rc = check_command(json_object_get(run, "command"), err)) != 0)
        return rc;
    json_t *in = json_object_get(run, "stdin");
    if (in && !(json_is_string(in) && (strcmp(json_string_value(in), "input") == 0 ||
                                       strcmp(json_string_value(in), "none") == 0)))
        return bad(err, "run.stdin", "must be \"input\" or \"none\"");
    if ((rc = check_limits(run, err)) != 0)
        return rc;
    /* Host patterns that narrow the operator's egress lists (docs/egress.md). */
    if ((rc = check_string(run, "egressAllowHosts", "run.egressAllowHosts", 0, 4096, err)) ||
        (rc = check_string(run, "egressDenyHosts", "run.egressDenyHosts", 0, 4096, err)))
        return rc;
    return 0;
}

int skd_manifest_check(const json_t *m, const skd_config *cfg, skd_err *err)
{
    static const char *const keys[] = {"name",         "version", "description", "inputSchema",
                                       "outputSchema", "tags",    "run",         NULL};
    int rc;
    if (!json_is_object(m))
        return skd_err_set(err, SKD_EINVAL, "manifest: must be a JSON object");
    char *dump = json_dumps(m, JSON_COMPACT);
    size_t len = dump ? strlen(dump) : 0;
    free(dump);
    if (len > SKD_MANIFEST_MAX_BYTES)
        return skd_err_set(err, SKD_ETOOBIG, "manifest: larger than %u bytes",
                           SKD_MANIFEST_MAX_BYTES);
    if ((rc = only_keys(m, ".", keys, err)) != 0)
        return rc;
    if ((rc = check_string(m, "name", "name", 1, 64, err)) != 0)
        return rc;
    if (!skd_skill_name_valid(skd_json_str(m, "name", "")))
        return bad(err, "name", "must match [a-z][a-z0-9_-]{0,63}");
    if ((rc = check_string(m, "version", "version", 1, 32, err)) != 0)
        return rc;
    if (!skd_version_valid(skd_json_str(m, "version", "")))
        return bad(err, "version", "must be x.y.z (decimal, no leading zeros)");
    if ((rc = check_string(m, "description", "description", 1, DESC_MAX, err)) != 0)
        return rc;
    if ((rc = check_schema(m, "inputSchema", 1, err)) != 0 ||
        (rc = check_schema(m, "outputSchema", 0, err)) != 0)
        return rc;
    if ((rc = check_tags(json_object_get(m, "tags"), err)) != 0)
        return rc;
    return check_run(json_object_get(m, "run"), cfg, err);
}

int skd__manifest_limits(const json_t *run, const skd_config *cfg, skd_sandbox_config *out,
                         skd_err *err)
{
    skd_sandbox_config_defaults(out, cfg);
    int rc = check_limits(run, err);
    for (int i = 0; rc == 0 && i < SKD_LIMIT_N; i++) {
        json_t *v = skd_limits[i].mkey ? json_object_get(run, skd_limits[i].mkey) : NULL;
        if (v)
            skd_limit_set(out, i,
                          skd_limits[i].kind == SKD_LIMIT_BOOL ? json_is_true(v)
                                                               : json_integer_value(v));
    }
    return rc;
}

int skd_manifest_check_ceilings(const json_t *m, const skd_config *cfg, skd_err *err)
{
    skd_sandbox_config sc;
    skd_sandbox_ceilings ceil;
    skd_err inner = {0};
    int rc = skd__manifest_limits(json_object_get(m, "run"), cfg, &sc, &inner);
    if (rc == 0) {
        skd_sandbox_ceilings_from_config(&ceil, cfg);
        rc = skd_sandbox_config_check(&sc, &ceil, &inner);
    }
    return rc ? skd_err_set(err, rc, "manifest.run: %s", skd_err_msg(&inner)) : 0;
}
