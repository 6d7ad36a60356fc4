/*
 * Sandbox limits: defaults from the configuration and the JSON form with
 * OmniRoute's field names (cpuLimit, memoryLimit, timeout, networkEnabled,
 * readOnly) plus ours (workspaceReadOnly, pidsLimit, outputLimit,
 * fileSizeLimit, tmpSize). Input comes from clients: every field is type-
 * and range-checked, unknown fields are refused, nothing changes on error.
 */
#include "skilld/sandbox.h"

#include <stddef.h>
#include <string.h>

#define MIB (1024 * 1024)
#define DEF_FILE_SIZE (64LL * MIB)
#define DEF_TMP_SIZE (64LL * MIB)

void skd_sandbox_config_defaults(skd_sandbox_config *c, const skd_config *cfg)
{
    memset(c, 0, sizeof(*c));
    c->cpu_limit = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_CPU_PERCENT") : 100;
    c->memory_limit = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MEMORY_MB") : 512;
    c->timeout_ms = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_TIMEOUT_MS") : 10000;
    c->network_enabled = cfg ? skd_config_bool(cfg, "SKILLS_SANDBOX_NETWORK_ENABLED") : 0;
    c->read_only = 1;
    c->workspace_read_only = 0;
    c->pids_limit = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_PIDS_LIMIT") : 64;
    c->output_limit = cfg ? skd_config_int(cfg, "SKILLS_MAX_SANDBOX_OUTPUT_CHARS") : 100000;
    c->file_size_limit = DEF_FILE_SIZE;
    c->tmp_size = DEF_TMP_SIZE;
}

struct field {
    const char *name;
    size_t off;
    int is_bool;
    int64_t min, max;
};

#define F_INT(n, m, lo, hi)                                                                        \
    {                                                                                              \
        n, offsetof(skd_sandbox_config, m), 0, lo, hi                                              \
    }
#define F_BOOL(n, m)                                                                               \
    {                                                                                              \
        n, offsetof(skd_sandbox_config, m), 1, 0, 1                                                \
    }

static const struct field fields[] = {
    F_INT("cpuLimit", cpu_limit, 1, 102400),
    F_INT("memoryLimit", memory_limit, SKD_SANDBOX_MIN_MEMORY_MB, 1048576),
    F_INT("timeout", timeout_ms, 1, SKD_SANDBOX_MAX_TIMEOUT_MS),
    F_BOOL("networkEnabled", network_enabled),
    F_BOOL("readOnly", read_only),
    F_BOOL("workspaceReadOnly", workspace_read_only),
    F_INT("pidsLimit", pids_limit, 1, SKD_SANDBOX_MAX_PIDS),
    F_INT("outputLimit", output_limit, 0, 1LL << 30),
    F_INT("fileSizeLimit", file_size_limit, 1, 1LL << 40),
    F_INT("tmpSize", tmp_size, MIB, 1LL << 36),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static const struct field *find_field(const char *name)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

int skd_sandbox_config_from_json(skd_sandbox_config *c, const json_t *obj, skd_err *err)
{
    if (!obj || json_is_null(obj))
        return 0;
    if (!json_is_object(obj))
        return skd_err_set(err, SKD_EINVAL, "sandbox config must be an object");
    skd_sandbox_config tmp = *c;
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)obj, key, v) {
        const struct field *f = find_field(key);
        if (!f)
            return skd_err_set(err, SKD_EINVAL, "sandbox config: unknown field '%s'", key);
        char *slot = (char *)&tmp + f->off;
        if (f->is_bool) {
            if (!json_is_boolean(v))
                return skd_err_set(err, SKD_EINVAL, "sandbox config: %s must be a boolean", key);
            *(int *)slot = json_is_true(v);
            continue;
        }
        if (!json_is_integer(v))
            return skd_err_set(err, SKD_EINVAL, "sandbox config: %s must be an integer", key);
        json_int_t n = json_integer_value(v);
        if (n < f->min || n > f->max)
            return skd_err_set(err, SKD_EINVAL, "sandbox config: %s must be in [%lld, %lld]", key,
                               (long long)f->min, (long long)f->max);
        *(int64_t *)slot = n;
    }
    *c = tmp;
    return 0;
}

json_t *skd_sandbox_config_to_json(const skd_sandbox_config *c)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *slot = (const char *)c + fields[i].off;
        json_t *v = fields[i].is_bool ? json_boolean(*(const int *)slot)
                                      : json_integer(*(const int64_t *)slot);
        if (json_object_set_new(o, fields[i].name, v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
