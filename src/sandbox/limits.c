/*
 * Sandbox limits: defaults from the configuration and the JSON form with
 * OmniRoute's field names (cpuLimit, memoryLimit, timeout, networkEnabled,
 * readOnly) plus ours (workspaceReadOnly, pidsLimit, outputLimit,
 * fileSizeLimit, tmpSize). Input comes from clients: every field is type-
 * and range-checked, unknown fields are refused, nothing changes on error.
 */
#include "skilld/sandbox.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define DEF_FILE_SIZE (64LL * MIB)
#define DEF_TMP_SIZE (64LL * MIB)

/* ---- ceilings -------------------------------------------------------------- */

/* Online CPUs x 100. glibc reads /sys/devices/system/cpu/online for every
 * sysconf call (an open, a read and a close on every sandbox call's
 * ceilings), so the count is kept for a second: a CPU brought online shows
 * within that. */
static int64_t cores_x100(void)
{
    static int64_t cached, at_ms;
    int64_t now = skd_mono_ms(), c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c > 0 && now - __atomic_load_n(&at_ms, __ATOMIC_RELAXED) < 1000)
        return c;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c = (int64_t)(n > 0 ? n : 1) * 100;
    __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    __atomic_store_n(&at_ms, now, __ATOMIC_RELAXED);
    return c;
}

void skd_sandbox_ceilings_from_config(skd_sandbox_ceilings *c, const skd_config *cfg)
{
    memset(c, 0, sizeof(*c));
    c->max_timeout_ms = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MAX_TIMEOUT_MS") : 60000;
    c->max_memory_mb = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MAX_MEMORY_MB") : 1024;
    c->max_cpu = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MAX_CPU") : 0;
    if (c->max_cpu <= 0)
        c->max_cpu = cores_x100();
    c->max_pids = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MAX_PIDS") : 256;
    c->max_output_bytes = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MAX_OUTPUT_BYTES") : MIB;
    c->max_tmp_bytes = (cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MAX_TMP_MB") : 256) * MIB;
    c->network_allowed = cfg ? skd_config_bool(cfg, "SKILLS_SANDBOX_NETWORK_ENABLED") : 0;
}

/* One bounded field: its bit, wire name, setting, where it lives in the
 * config and in the ceilings, and the setting's unit (1, or MIB when the
 * setting is in MiB and the field in bytes). */
struct ceil_field {
    unsigned bit;
    const char *name, *setting, *def_setting;
    size_t cfg_off, ceil_off;
    int64_t unit;
};

#define CF(b, n, s, d, m, cm, u)                                                                   \
    {                                                                                              \
        b, n, s, d, offsetof(skd_sandbox_config, m), offsetof(skd_sandbox_ceilings, cm), u         \
    }

static const struct ceil_field ceil_fields[] = {
    CF(SKD_CEIL_TIMEOUT, "timeout", "SKILLS_SANDBOX_MAX_TIMEOUT_MS", "SKILLS_SANDBOX_TIMEOUT_MS",
       timeout_ms, max_timeout_ms, 1),
    CF(SKD_CEIL_MEMORY, "memoryLimit", "SKILLS_SANDBOX_MAX_MEMORY_MB", "SKILLS_SANDBOX_MEMORY_MB",
       memory_limit, max_memory_mb, 1),
    CF(SKD_CEIL_CPU, "cpuLimit", "SKILLS_SANDBOX_MAX_CPU", "SKILLS_SANDBOX_CPU_PERCENT", cpu_limit,
       max_cpu, 1),
    CF(SKD_CEIL_PIDS, "pidsLimit", "SKILLS_SANDBOX_MAX_PIDS", "SKILLS_SANDBOX_PIDS_LIMIT",
       pids_limit, max_pids, 1),
    CF(SKD_CEIL_OUTPUT, "outputLimit", "SKILLS_SANDBOX_MAX_OUTPUT_BYTES",
       "SKILLS_MAX_SANDBOX_OUTPUT_CHARS", output_limit, max_output_bytes, 1),
    CF(SKD_CEIL_TMP, "tmpSize", "SKILLS_SANDBOX_MAX_TMP_MB", NULL, tmp_size, max_tmp_bytes, MIB),
};

#define NCEIL (sizeof(ceil_fields) / sizeof(ceil_fields[0]))

static int64_t cfg_val(const skd_sandbox_config *sc, const struct ceil_field *f)
{
    return *(const int64_t *)((const char *)sc + f->cfg_off);
}

static int64_t ceil_val(const skd_sandbox_ceilings *c, const struct ceil_field *f)
{
    return *(const int64_t *)((const char *)c + f->ceil_off);
}

int skd_sandbox_config_check(const skd_sandbox_config *sc, const skd_sandbox_ceilings *ceil,
                             skd_err *err)
{
    for (size_t i = 0; i < NCEIL; i++) {
        const struct ceil_field *f = &ceil_fields[i];
        int64_t v = cfg_val(sc, f), max = ceil_val(ceil, f);
        if (v > max)
            return skd_err_set(err, SKD_EINVAL, "%s %lld is above the operator's ceiling %s=%lld%s",
                               f->name, (long long)v, f->setting, (long long)(max / f->unit),
                               f->unit == MIB ? " (MiB)" : "");
    }
    if (sc->network_enabled && !ceil->network_allowed)
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "networkEnabled: the operator has not allowed network access "
                           "(SKILLS_SANDBOX_NETWORK_ENABLED=false)");
    return 0;
}

unsigned skd_sandbox_config_clamp(skd_sandbox_config *sc, const skd_sandbox_ceilings *ceil)
{
    unsigned bits = 0;
    for (size_t i = 0; i < NCEIL; i++) {
        const struct ceil_field *f = &ceil_fields[i];
        int64_t max = ceil_val(ceil, f);
        if (cfg_val(sc, f) > max) {
            *(int64_t *)((char *)sc + f->cfg_off) = max;
            bits |= f->bit;
        }
    }
    return bits;
}

json_t *skd_sandbox_clamped_json(unsigned bits)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < NCEIL; i++)
        if ((bits & ceil_fields[i].bit) &&
            json_array_append_new(a, json_string(ceil_fields[i].name))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static void raw_defaults(skd_sandbox_config *c, const skd_config *cfg)
{
    memset(c, 0, sizeof(*c));
    c->cpu_limit = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_CPU_PERCENT") : 100;
    c->memory_limit = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_MEMORY_MB") : 512;
    c->timeout_ms = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_TIMEOUT_MS") : 10000;
    c->network_enabled = 0; /* a caller asks; SKILLS_SANDBOX_NETWORK_ENABLED permits */
    c->read_only = 1;
    c->workspace_read_only = 0;
    c->pids_limit = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_PIDS_LIMIT") : 64;
    c->output_limit = cfg ? skd_config_int(cfg, "SKILLS_MAX_SANDBOX_OUTPUT_CHARS") : 100000;
    c->file_size_limit = DEF_FILE_SIZE;
    c->tmp_size = DEF_TMP_SIZE;
    c->workspace_quota = 0; /* no cfg: no overlay (a bare runner of tests and benchmarks) */
    if (cfg && strcmp(skd_config_str(cfg, "SKILLS_SANDBOX_WORKSPACE_QUOTA"), "off") != 0)
        c->workspace_quota = skd_config_int(cfg, "SKILLS_WORKSPACE_QUOTA_BYTES");
    c->data_reserve = cfg ? skd_config_int(cfg, "SKILLS_DATA_RESERVE_BYTES") : 0;
}

int skd_sandbox_ceilings_warn(const skd_config *cfg)
{
    skd_sandbox_config c;
    skd_sandbox_ceilings ceil;
    int n = 0;
    raw_defaults(&c, cfg);
    skd_sandbox_ceilings_from_config(&ceil, cfg);
    for (size_t i = 0; i < NCEIL; i++) {
        const struct ceil_field *f = &ceil_fields[i];
        int64_t v = cfg_val(&c, f), max = ceil_val(&ceil, f);
        if (v <= max)
            continue;
        n++;
        skd_warn("%s=%lld is above the ceiling %s=%lld%s: runs use the ceiling",
                 f->def_setting ? f->def_setting : "the built-in default", (long long)(v / f->unit),
                 f->setting, (long long)(max / f->unit), f->unit == MIB ? " (MiB)" : "");
    }
    return n;
}

void skd_sandbox_config_defaults(skd_sandbox_config *c, const skd_config *cfg)
{
    skd_sandbox_ceilings ceil;
    raw_defaults(c, cfg);
    skd_sandbox_ceilings_from_config(&ceil, cfg);
    (void)skd_sandbox_config_clamp(c, &ceil);
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
