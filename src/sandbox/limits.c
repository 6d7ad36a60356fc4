/*
 * Sandbox limits, all from the rows of include/skilld/limits.h: the
 * defaults and the operator's ceilings from the configuration, the ceiling
 * check and clamp, and the JSON form with OmniRoute's field names
 * (cpuLimit, memoryLimit, timeout, networkEnabled, readOnly) plus ours
 * (workspaceReadOnly, pidsLimit, outputLimit, fileSizeLimit, tmpSize).
 * Input comes from clients: every field is type- and range-checked,
 * unknown fields are refused, nothing changes on error.
 */
#include "skilld/sandbox.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- the rows ------------------------------------------------------------- */

/* A row's bit in an unsigned (clamp's answer, the decoder's seen set). */
_Static_assert(SKD_LIMIT_N <= 32, "more limit rows than bits in an unsigned");

const skd_limit skd_limits[SKD_LIMIT_N] = {
#define ROW(ID, field, kind, key, mkey, flag, def_env, def, ceil_env, ceil, auto0, min, max,       \
            scale, unit, tag, doc)                                                                 \
    [SKD_LIMIT_##ID] = {key, mkey, flag, def_env, ceil_env, auto0, unit, doc, SKD_LIMIT_##kind,    \
                        def, ceil, min,  max,     scale,    tag},
    SKD_SANDBOX_LIMITS(ROW)
#undef ROW
};

/* Where each row lives in skd_sandbox_config. */
static const size_t offsets[SKD_LIMIT_N] = {
#define OFF(ID, field, ...) [SKD_LIMIT_##ID] = offsetof(skd_sandbox_config, field),
    SKD_SANDBOX_LIMITS(OFF)
#undef OFF
};

const skd_limit *skd_limit_by_key(const char *name, int manifest)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const char *k = manifest ? skd_limits[i].mkey : skd_limits[i].key;
        if (k && strcmp(k, name) == 0)
            return &skd_limits[i];
    }
    return NULL;
}

int skd_limit_by_tag(uint32_t tag)
{
    /* A switch, so that two rows with one tag do not compile. */
    switch (tag) {
#define TAG_CASE(ID, field, kind, key, mkey, flag, def_env, def, ceil_env, ceil, auto0, min, max,  \
                 scale, unit, tag, doc)                                                            \
    case tag:                                                                                      \
        return SKD_LIMIT_##ID;
        SKD_SANDBOX_LIMITS(TAG_CASE)
#undef TAG_CASE
    default:
        return -1;
    }
}

int64_t skd_limit_get(const skd_sandbox_config *c, int id)
{
    const char *slot = (const char *)c + offsets[id];
    if (skd_limits[id].kind == SKD_LIMIT_BOOL)
        return *(const int *)slot != 0;
    return *(const int64_t *)slot;
}

void skd_limit_set(skd_sandbox_config *c, int id, int64_t v)
{
    char *slot = (char *)c + offsets[id];
    if (skd_limits[id].kind == SKD_LIMIT_BOOL)
        *(int *)slot = v != 0;
    else
        *(int64_t *)slot = v;
}

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

/* A setting of row l (def_env or ceil_env) in the settings' unit: from cfg,
 * else the row's built-in value. */
static int64_t setting(const skd_config *cfg, const skd_limit *l, const char *name, int64_t def)
{
    if (!cfg || !name)
        return def;
    return l->kind == SKD_LIMIT_BOOL ? skd_config_bool(cfg, name) : skd_config_int(cfg, name);
}

void skd_sandbox_ceilings_from_config(skd_sandbox_ceilings *c, const skd_config *cfg)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        if (!l->ceil_env) {
            c->max[i] = l->max;
            continue;
        }
        int64_t v = setting(cfg, l, l->ceil_env, l->ceil);
        /* auto0: only the CPU row has one, 0 standing for every core. */
        if (v == 0 && l->auto0[0])
            v = cores_x100();
        c->max[i] = v * l->scale;
    }
}

/* The ceiling of row i in the settings' unit, with " (MiB)" after it when
 * that is not the field's unit, for messages. */
static const char *scale_note(const skd_limit *l)
{
    return l->scale == SKD_LIMIT_MIB ? " (MiB)" : "";
}

int skd_sandbox_config_check(const skd_sandbox_config *sc, const skd_sandbox_ceilings *ceil,
                             skd_err *err)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        int64_t v = skd_limit_get(sc, i), max = ceil->max[i];
        if (v < l->min || v > l->max)
            return skd_err_set(err, SKD_EINVAL, "sandbox config: %s must be in [%lld, %lld]",
                               l->key, (long long)l->min, (long long)l->max);
        if (v <= max)
            continue;
        if (l->kind == SKD_LIMIT_BOOL)
            return skd_err_set(err, SKD_EFORBIDDEN,
                               "%s: the operator has not allowed it (%s=false)", l->key,
                               l->ceil_env ? l->ceil_env : "no setting");
        return skd_err_set(err, SKD_EINVAL, "%s %lld is above the operator's ceiling %s=%lld%s",
                           l->key, (long long)v, l->ceil_env ? l->ceil_env : "(none)",
                           (long long)(max / l->scale), scale_note(l));
    }
    return 0;
}

unsigned skd_sandbox_config_clamp(skd_sandbox_config *sc, const skd_sandbox_ceilings *ceil)
{
    unsigned bits = 0;
    for (int i = 0; i < SKD_LIMIT_N; i++)
        if (skd_limits[i].kind == SKD_LIMIT_INT && skd_limit_get(sc, i) > ceil->max[i]) {
            skd_limit_set(sc, i, ceil->max[i]);
            bits |= 1u << i;
        }
    return bits;
}

json_t *skd_sandbox_clamped_json(unsigned bits)
{
    json_t *a = json_array();
    for (int i = 0; a && i < SKD_LIMIT_N; i++)
        if ((bits & (1u << i)) && json_array_append_new(a, json_string(skd_limits[i].key))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The defaults before they are held to the ceilings. */
static void raw_defaults(skd_sandbox_config *c, const skd_config *cfg)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        skd_limit_set(c, i, setting(cfg, l, l->def_env, l->def) * l->scale);
    }
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
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        int64_t v = skd_limit_get(&c, i), max = ceil.max[i];
        if (l->kind != SKD_LIMIT_INT || v <= max)
            continue;
        n++;
        skd_warn("%s=%lld is above the ceiling %s=%lld%s: runs use the ceiling",
                 l->def_env ? l->def_env : "the built-in default", (long long)(v / l->scale),
                 l->ceil_env ? l->ceil_env : "(none)", (long long)(max / l->scale), scale_note(l));
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

int skd_sandbox_limits_describe(const skd_config *cfg, char *buf, size_t cap)
{
    skd_sandbox_config raw, def;
    skd_sandbox_ceilings ceil;
    size_t len = 0;
    int over = 0;
    raw_defaults(&raw, cfg);
    skd_sandbox_config_defaults(&def, cfg);
    skd_sandbox_ceilings_from_config(&ceil, cfg);
    buf[0] = '\0';
    for (int i = 0; i < SKD_LIMIT_N && len < cap; i++) {
        const skd_limit *l = &skd_limits[i];
        long long v = (long long)skd_limit_get(&def, i), max = (long long)ceil.max[i];
        int n;
        over += skd_limit_get(&raw, i) != skd_limit_get(&def, i);
        if (l->kind == SKD_LIMIT_BOOL)
            n = snprintf(buf + len, cap - len, "%s%s %s%s", i ? ", " : "", l->key,
                         v ? "true" : "false",
                         !l->ceil_env ? ""
                         : max        ? " (allowed)"
                                      : " (not allowed)");
        else if (l->ceil_env)
            n = snprintf(buf + len, cap - len, "%s%s %lld (ceiling %lld)", i ? ", " : "", l->key, v,
                         max);
        else
            n = snprintf(buf + len, cap - len, "%s%s %lld", i ? ", " : "", l->key, v);
        len += n > 0 ? (size_t)n : 0;
    }
    return over;
}

json_t *skd_sandbox_limit_schema(json_t *schema, int id)
{
    const skd_limit *l = &skd_limits[id];
    json_t *props = json_object_get(schema, "properties");
    json_t *v = l->kind == SKD_LIMIT_BOOL
                    ? json_pack("{s:s}", "type", "boolean")
                    : json_pack("{s:s, s:I, s:I}", "type", "integer", "minimum", (json_int_t)l->min,
                                "maximum", (json_int_t)l->max);
    if (!json_is_object(props) || !l->mkey || !v || json_object_set_new(props, l->mkey, v)) {
        json_decref(schema);
        return NULL;
    }
    return schema;
}

/* ---- the JSON form --------------------------------------------------------- */

/* Set row l of c from the JSON value v; path names it in messages. */
static int limit_from_json(skd_sandbox_config *c, const skd_limit *l, const json_t *v,
                           const char *path, skd_err *err)
{
    int id = (int)(l - skd_limits);
    if (l->kind == SKD_LIMIT_BOOL) {
        if (!json_is_boolean(v))
            return skd_err_set(err, SKD_EINVAL, "%s must be a boolean", path);
        skd_limit_set(c, id, json_is_true(v));
        return 0;
    }
    if (!json_is_integer(v))
        return skd_err_set(err, SKD_EINVAL, "%s must be an integer", path);
    json_int_t n = json_integer_value(v);
    if (n < l->min || n > l->max)
        return skd_err_set(err, SKD_EINVAL, "%s must be in [%lld, %lld]", path, (long long)l->min,
                           (long long)l->max);
    skd_limit_set(c, id, n);
    return 0;
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
    char path[96];
    json_object_foreach ((json_t *)obj, key, v) {
        const skd_limit *l = skd_limit_by_key(key, 0);
        if (!l)
            return skd_err_set(err, SKD_EINVAL, "sandbox config: unknown field '%s'", key);
        snprintf(path, sizeof(path), "sandbox config: %s", key);
        int rc = limit_from_json(&tmp, l, v, path, err);
        if (rc)
            return rc;
    }
    *c = tmp;
    return 0;
}

json_t *skd_sandbox_config_to_json(const skd_sandbox_config *c)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        int64_t n = skd_limit_get(c, i);
        json_t *v = skd_limits[i].kind == SKD_LIMIT_BOOL ? json_boolean(n) : json_integer(n);
        if (json_object_set_new(o, skd_limits[i].key, v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
