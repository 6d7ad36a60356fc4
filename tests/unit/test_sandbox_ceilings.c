/*
 * The operator's ceilings (src/sandbox/limits.c, src/lib/manifest.c): the
 * settings and their defaults, the check that refuses a limit above a
 * ceiling naming it, the clamp that lowers one and says which, defaults
 * clamped, networkEnabled as the operator's switch, and a manifest above
 * each ceiling refused.
 */
#include "tap.h"

#include <unistd.h>

#include "skilld/config.h"
#include "skilld/custom.h"
#include "skilld/sandbox.h"

static skd_config *cfg_with(const char *const *pairs)
{
    skd_config *cfg = skd_config_new();
    skd_err err = {0};
    for (size_t i = 0; cfg && pairs && pairs[i]; i += 2)
        if (skd_config_set(cfg, pairs[i], pairs[i + 1], &err)) {
            printf("# %s\n", err.msg);
            skd_config_free(cfg);
            return NULL;
        }
    return cfg;
}

TEST(ceiling_defaults)
{
    skd_config *cfg = cfg_with(NULL);
    skd_sandbox_ceilings c;
    skd_sandbox_ceilings_from_config(&c, cfg);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK_EQ_INT(c.max[SKD_LIMIT_TIMEOUT], 60000);
    CHECK_EQ_INT(c.max[SKD_LIMIT_MEMORY], 1024);
    CHECK_EQ_INT(c.max[SKD_LIMIT_CPU], (cores > 0 ? cores : 1) * 100);
    CHECK_EQ_INT(c.max[SKD_LIMIT_PIDS], 256);
    CHECK_EQ_INT(c.max[SKD_LIMIT_OUTPUT], 1 << 20);
    CHECK_EQ_INT(c.max[SKD_LIMIT_TMP], 256LL << 20);
    CHECK_EQ_INT(c.max[SKD_LIMIT_NETWORK], 0);
    /* The same without a configuration. */
    skd_sandbox_ceilings d;
    skd_sandbox_ceilings_from_config(&d, NULL);
    CHECK(memcmp(&c, &d, sizeof(c)) == 0);
    skd_config_free(cfg);
}

/* Every ceiling refuses one above it, naming the field and the setting,
 * and accepts one at it. */
TEST(check_names_each_ceiling)
{
    static const struct {
        size_t off;
        int64_t at, above;
        const char *field, *setting;
    } cases[] = {
        {offsetof(skd_sandbox_config, timeout_ms), 5000, 5001, "timeout",
         "SKILLS_SANDBOX_MAX_TIMEOUT_MS=5000"},
        {offsetof(skd_sandbox_config, memory_limit), 64, 65, "memoryLimit",
         "SKILLS_SANDBOX_MAX_MEMORY_MB=64"},
        {offsetof(skd_sandbox_config, cpu_limit), 50, 51, "cpuLimit", "SKILLS_SANDBOX_MAX_CPU=50"},
        {offsetof(skd_sandbox_config, pids_limit), 16, 17, "pidsLimit",
         "SKILLS_SANDBOX_MAX_PIDS=16"},
        {offsetof(skd_sandbox_config, output_limit), 4096, 4097, "outputLimit",
         "SKILLS_SANDBOX_MAX_OUTPUT_BYTES=4096"},
        {offsetof(skd_sandbox_config, tmp_size), 8LL << 20, (8LL << 20) + 1, "tmpSize",
         "SKILLS_SANDBOX_MAX_TMP_MB=8"},
    };
    static const char *const set[] = {"SKILLS_SANDBOX_MAX_TIMEOUT_MS",
                                      "5000",
                                      "SKILLS_SANDBOX_MAX_MEMORY_MB",
                                      "64",
                                      "SKILLS_SANDBOX_MAX_CPU",
                                      "50",
                                      "SKILLS_SANDBOX_MAX_PIDS",
                                      "16",
                                      "SKILLS_SANDBOX_MAX_OUTPUT_BYTES",
                                      "4096",
                                      "SKILLS_SANDBOX_MAX_TMP_MB",
                                      "8",
                                      NULL};
    skd_config *cfg = cfg_with(set);
    CHECK(cfg != NULL);
    if (!cfg)
        return;
    skd_sandbox_ceilings ceil;
    skd_sandbox_ceilings_from_config(&ceil, cfg);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        skd_sandbox_config sc;
        skd_err err = {0};
        skd_sandbox_config_defaults(&sc, cfg);
        CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), 0);
        *(int64_t *)((char *)&sc + cases[i].off) = cases[i].at;
        CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), 0);
        *(int64_t *)((char *)&sc + cases[i].off) = cases[i].above;
        CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), SKD_EINVAL);
        CHECK(strncmp(err.msg, cases[i].field, strlen(cases[i].field)) == 0);
        CHECK(strstr(err.msg, cases[i].setting) != NULL);
        if (tap_case_failed) {
            printf("# case %zu: %s\n", i, err.msg);
            break;
        }
    }
    skd_config_free(cfg);
}

TEST(clamp_lowers_and_names)
{
    static const char *const set[] = {"SKILLS_SANDBOX_MAX_TIMEOUT_MS", "2000",
                                      "SKILLS_SANDBOX_MAX_MEMORY_MB", "100", NULL};
    skd_config *cfg = cfg_with(set);
    skd_sandbox_ceilings ceil;
    skd_sandbox_ceilings_from_config(&ceil, cfg);
    skd_sandbox_config sc;
    skd_sandbox_config_defaults(&sc, NULL);
    sc.timeout_ms = 3000;
    sc.memory_limit = 100; /* at the ceiling: not clamped */
    sc.pids_limit = 10000;
    unsigned bits = skd_sandbox_config_clamp(&sc, &ceil);
    CHECK_EQ_INT(bits, (1u << SKD_LIMIT_TIMEOUT) | (1u << SKD_LIMIT_PIDS));
    CHECK_EQ_INT(sc.timeout_ms, 2000);
    CHECK_EQ_INT(sc.memory_limit, 100);
    CHECK_EQ_INT(sc.pids_limit, 256);
    skd_err err = {0};
    CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), 0);
    json_t *names = skd_sandbox_clamped_json(bits);
    char *txt = json_dumps(names, JSON_COMPACT);
    CHECK_STR(txt, "[\"timeout\",\"pidsLimit\"]");
    free(txt);
    json_decref(names);
    CHECK_EQ_INT(skd_sandbox_config_clamp(&sc, &ceil), 0); /* idempotent */
    skd_config_free(cfg);
}

/* A default above its ceiling is clamped (and warned about once). */
TEST(defaults_clamped)
{
    static const char *const set[] = {"SKILLS_SANDBOX_TIMEOUT_MS",
                                      "30000",
                                      "SKILLS_SANDBOX_MAX_TIMEOUT_MS",
                                      "1000",
                                      "SKILLS_SANDBOX_MEMORY_MB",
                                      "512",
                                      "SKILLS_SANDBOX_MAX_MEMORY_MB",
                                      "256",
                                      NULL};
    skd_config *cfg = cfg_with(set);
    skd_sandbox_config sc;
    skd_sandbox_config_defaults(&sc, cfg);
    CHECK_EQ_INT(sc.timeout_ms, 1000);
    CHECK_EQ_INT(sc.memory_limit, 256);
    CHECK_EQ_INT(skd_sandbox_ceilings_warn(cfg), 2);
    skd_config *plain = cfg_with(NULL);
    CHECK_EQ_INT(skd_sandbox_ceilings_warn(plain), 0);
    skd_config_free(plain);
    skd_config_free(cfg);
}

TEST(network_is_the_operators_switch)
{
    static const char *const on[] = {"SKILLS_SANDBOX_NETWORK_ENABLED", "true", NULL};
    skd_config *off = cfg_with(NULL), *yes = cfg_with(on);
    skd_sandbox_ceilings c_off, c_on;
    skd_sandbox_ceilings_from_config(&c_off, off);
    skd_sandbox_ceilings_from_config(&c_on, yes);
    skd_sandbox_config sc;
    skd_err err = {0};
    skd_sandbox_config_defaults(&sc, yes);
    CHECK_EQ_INT(sc.network_enabled, 0); /* the setting permits; it is no default */
    sc.network_enabled = 1;
    CHECK_EQ_INT(skd_sandbox_config_check(&sc, &c_off, &err), SKD_EFORBIDDEN);
    CHECK(strstr(err.msg, "SKILLS_SANDBOX_NETWORK_ENABLED") != NULL);
    CHECK_EQ_INT(skd_sandbox_config_check(&sc, &c_on, &err), 0);
    CHECK_EQ_INT(skd_sandbox_config_clamp(&sc, &c_off), 0);
    CHECK_EQ_INT(sc.network_enabled, 1); /* never clamped silently: refused */
    skd_config_free(off);
    skd_config_free(yes);
}

static json_t *manifest_with(const char *run_extra)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"name\": \"m\", \"version\": \"1.0.0\", \"description\": \"d\","
             " \"inputSchema\": {\"type\": \"object\"},"
             " \"run\": {\"command\": [\"true\"]%s%s}}",
             run_extra[0] ? ", " : "", run_extra);
    return json_loads(buf, 0, NULL);
}

TEST(manifest_over_each_ceiling_refused)
{
    static const char *const over[][2] = {
        {"\"timeoutMs\": 3600000", "SKILLS_SANDBOX_MAX_TIMEOUT_MS"},
        {"\"memoryLimit\": 1048576", "SKILLS_SANDBOX_MAX_MEMORY_MB"},
        {"\"cpuLimit\": 102400", "SKILLS_SANDBOX_MAX_CPU"},
        {"\"pidsLimit\": 65536", "SKILLS_SANDBOX_MAX_PIDS"},
        {"\"outputLimit\": 1073741824", "SKILLS_SANDBOX_MAX_OUTPUT_BYTES"},
        {"\"tmpSize\": 68719476736", "SKILLS_SANDBOX_MAX_TMP_MB"},
    };
    skd_config *cfg = cfg_with(NULL);
    for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
        json_t *m = manifest_with(over[i][0]);
        skd_err err = {0};
        CHECK(m != NULL);
        CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), 0);                   /* well-formed ... */
        CHECK_EQ_INT(skd_manifest_check_ceilings(m, cfg, &err), SKD_EINVAL); /* ... too big */
        CHECK(strstr(err.msg, over[i][1]) != NULL);
        CHECK(strncmp(err.msg, "manifest.run: ", 14) == 0);
        json_decref(m);
    }
    json_t *m = manifest_with("\"timeoutMs\": 60000, \"memoryLimit\": 1024, \"pidsLimit\": 256,"
                              " \"outputLimit\": 1048576, \"tmpSize\": 268435456");
    skd_err err = {0};
    CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), 0);
    CHECK_EQ_INT(skd_manifest_check_ceilings(m, cfg, &err), 0);
    json_decref(m);
    m = manifest_with("\"networkEnabled\": true");
    CHECK_EQ_INT(skd_manifest_check_ceilings(m, cfg, &err), SKD_EFORBIDDEN);
    json_decref(m);
    /* Above the hard range: a format error already. */
    m = manifest_with("\"timeoutMs\": 3600001");
    CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "manifest.run.timeoutMs") != NULL);
    json_decref(m);
    skd_config_free(cfg);
}

int main(void)
{
    TAP_BEGIN("sandbox_ceilings");
    RUN(ceiling_defaults);
    RUN(check_names_each_ceiling);
    RUN(clamp_lowers_and_names);
    RUN(defaults_clamped);
    RUN(network_is_the_operators_switch);
    RUN(manifest_over_each_ceiling_refused);
    return TAP_END();
}
