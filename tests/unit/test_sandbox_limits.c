/*
 * The table of sandbox limits (include/skilld/limits.h), row by row through
 * the whole chain: the row itself (unique keys and tags, default and
 * ceiling within the range), the configuration (default and ceiling from
 * the environment), a call's JSON and a manifest (set, out of range
 * refused), the ceiling (refused above it, clamped to it), the spawner wire
 * (round trip; a tag twice, an unknown tag, a value out of range and a
 * missing limit refused), enforcement by the native provider (the value is
 * where the kernel holds it for the running sandbox: its cgroup, its
 * rlimits, its mounts, or the runner's result), and docs/sandbox.md's table.
 * A row without a probe below does not compile.
 */
#include "sandbox_test.h"
#include "sandbox/spawner/spawner_proto.h"
#include "skilld/custom.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

/* A value of row i that is not its default, within its range and under the
 * default ceiling (the tests set their own ceilings around it). */
static int64_t probe_value(int i)
{
    const skd_limit *l = &skd_limits[i];
    if (l->kind == SKD_LIMIT_BOOL)
        return !(l->def != 0);
    static const int64_t v[SKD_LIMIT_N] = {
        [SKD_LIMIT_CPU] = 50,      [SKD_LIMIT_MEMORY] = 200, [SKD_LIMIT_TIMEOUT] = 300,
        [SKD_LIMIT_PIDS] = 20,     [SKD_LIMIT_OUTPUT] = 10,  [SKD_LIMIT_FILE_SIZE] = 1234567,
        [SKD_LIMIT_TMP] = 3 << 20,
    };
    return v[i];
}

static skd_config *cfg_env(void)
{
    skd_config *cfg = skd_config_new();
    skd_err err = {0};
    if (cfg && skd_config_load_env(cfg, &err)) {
        printf("# %s\n", skd_err_msg(&err));
        skd_config_free(cfg);
        return NULL;
    }
    return cfg;
}

TEST(rows_are_sane)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        CHECK(l->key && l->doc && l->unit && l->auto0 && l->tag != 0);
        CHECK_EQ_INT(skd_limit_by_tag(l->tag), i);
        CHECK(skd_limit_by_key(l->key, 0) == l);
        CHECK(!l->mkey || skd_limit_by_key(l->mkey, 1) == l);
        CHECK(l->scale >= 1 && l->min <= l->max);
        CHECK(l->def * l->scale >= l->min && l->def * l->scale <= l->max);
        CHECK((l->ceil == 0 && l->auto0[0]) ||
              (l->ceil * l->scale >= l->min && l->ceil * l->scale <= l->max));
        CHECK(probe_value(i) >= l->min && probe_value(i) <= l->max);
        CHECK(probe_value(i) != l->def * l->scale);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(skd_limits[j].key, l->key) != 0 && skd_limits[j].tag != l->tag);
    }
    CHECK_EQ_INT(skd_limit_by_tag(0), -1);
    CHECK(skd_limit_by_key("noSuchLimit", 0) == NULL);
}

/* The default and the ceiling of every row with a setting, from the
 * environment; a value above the ceiling refused by name, and clamped. */
TEST(config_ceiling_and_clamp)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        int64_t v = probe_value(i);
        char buf[32];
        skd_err err = {0};
        if (l->def_env) {
            snprintf(buf, sizeof(buf), "%lld", (long long)(v / l->scale));
            if (l->kind == SKD_LIMIT_BOOL)
                snprintf(buf, sizeof(buf), "%s", v ? "true" : "false");
            setenv(l->def_env, buf, 1);
        }
        /* The ceiling at the value: at it is fine, above it is not. */
        if (l->ceil_env) {
            if (l->kind == SKD_LIMIT_BOOL)
                snprintf(buf, sizeof(buf), "false");
            else
                snprintf(buf, sizeof(buf), "%lld", (long long)(v / l->scale));
            setenv(l->ceil_env, buf, 1);
        }
        skd_config *cfg = cfg_env();
        CHECK(cfg != NULL);
        if (!cfg)
            return;
        skd_sandbox_config sc;
        skd_sandbox_ceilings ceil;
        skd_sandbox_config_defaults(&sc, cfg);
        skd_sandbox_ceilings_from_config(&ceil, cfg);
        if (l->def_env)
            CHECK_EQ_INT(skd_limit_get(&sc, i), l->kind == SKD_LIMIT_BOOL ? 0 : v);
        else /* the built-in default, held to its ceiling */
            CHECK_EQ_INT(skd_limit_get(&sc, i), l->def * l->scale < ceil.max[i] || !l->ceil_env
                                                    ? l->def * l->scale
                                                    : ceil.max[i]);
        if (l->ceil_env && l->kind == SKD_LIMIT_INT) {
            CHECK_EQ_INT(ceil.max[i], v);
            skd_limit_set(&sc, i, v);
            CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), 0);
            skd_limit_set(&sc, i, v + 1);
            CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), SKD_EINVAL);
            CHECK(strstr(err.msg, l->key) && strstr(err.msg, l->ceil_env));
            CHECK_EQ_INT(skd_sandbox_config_clamp(&sc, &ceil), 1u << i);
            CHECK_EQ_INT(skd_limit_get(&sc, i), v);
        } else if (l->ceil_env) { /* the operator's switch, off */
            CHECK_EQ_INT(ceil.max[i], 0);
            skd_limit_set(&sc, i, 1);
            CHECK_EQ_INT(skd_sandbox_config_check(&sc, &ceil, &err), SKD_EFORBIDDEN);
            CHECK(strstr(err.msg, l->key) && strstr(err.msg, l->ceil_env));
            CHECK_EQ_INT(skd_sandbox_config_clamp(&sc, &ceil), 0); /* never clamped */
        } else {
            CHECK_EQ_INT(ceil.max[i], l->max);
        }
        if (l->def_env)
            unsetenv(l->def_env);
        if (l->ceil_env)
            unsetenv(l->ceil_env);
        skd_config_free(cfg);
    }
}

static json_t *manifest_run(const char *key, json_t *v)
{
    json_t *m =
        json_pack("{s:s, s:s, s:s, s:{s:s}, s:{s:[s]}}", "name", "m", "version", "1.0.0",
                  "description", "d", "inputSchema", "type", "object", "run", "command", "true");
    json_object_set_new(json_object_get(m, "run"), key, v);
    return m;
}

/* A call's JSON and a manifest set each row, and refuse it out of range. */
TEST(json_and_manifest)
{
    skd_config *cfg = skd_config_new();
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        int64_t v = probe_value(i);
        json_t *good = l->kind == SKD_LIMIT_BOOL ? json_boolean(v) : json_integer(v);
        json_t *bad = l->kind == SKD_LIMIT_BOOL ? json_integer(1) : json_integer(l->max + 1);
        skd_sandbox_config sc;
        skd_err err = {0};
        skd_sandbox_config_defaults(&sc, NULL);
        json_t *o = json_pack("{s:O}", l->key, good);
        CHECK_EQ_INT(skd_sandbox_config_from_json(&sc, o, &err), 0);
        CHECK_EQ_INT(skd_limit_get(&sc, i), v);
        json_decref(o);
        o = json_pack("{s:O}", l->key, bad);
        CHECK_EQ_INT(skd_sandbox_config_from_json(&sc, o, &err), SKD_EINVAL);
        CHECK(strstr(err.msg, l->key) != NULL);
        json_decref(o);
        json_t *out = skd_sandbox_config_to_json(&sc);
        CHECK(json_equal(json_object_get(out, l->key), good));
        json_decref(out);
        /* The manifest: its key sets the row; a row without one is unknown there. */
        json_t *m = manifest_run(l->mkey ? l->mkey : l->key, json_incref(good));
        if (l->mkey) {
            CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), 0);
            CHECK_EQ_INT(skd__manifest_limits(json_object_get(m, "run"), cfg, &sc, &err), 0);
            CHECK_EQ_INT(skd_limit_get(&sc, i), v);
            json_decref(m);
            m = manifest_run(l->mkey, json_incref(bad));
            CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), SKD_EINVAL);
            CHECK(strstr(err.msg, l->mkey) != NULL);
        } else {
            CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), SKD_EINVAL);
            CHECK(strstr(err.msg, "unknown field") != NULL);
        }
        json_decref(m);
        json_decref(good);
        json_decref(bad);
    }
    skd_config_free(cfg);
}

static int decode(const skd__spawn_out *o, skd__spawn_msg *m, skd_err *err)
{
    memcpy(o->buf + 6, &o->nfields, 2);
    return skd__spawn_decode(o->buf, o->len, NULL, 0, m, err);
}

/* A prepare request with every limit of c, row skip left out (-1: none),
 * then extra (a tag and a value) when extra_tag is not 0. */
static void prepare(skd__spawn_out *o, const skd_sandbox_config *c, int skip, uint32_t extra_tag,
                    int64_t extra)
{
    skd__spawn_out_init(o, SKD__REQ_PREPARE, 0);
    skd__spawn_out_str(o, SKD__T_PROVIDER, "native");
    skd__spawn_out_str(o, SKD__T_ID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    skd__spawn_out_str(o, SKD__T_IMAGE, "host");
    skd__spawn_out_str(o, SKD__T_CWD, "/tmp");
    skd__spawn_out_str(o, SKD__T_ARG, "true");
    for (int i = 0; i < SKD_LIMIT_N; i++)
        if (i != skip)
            skd__spawn_out_limit(o, skd_limits[i].tag, skd_limit_get(c, i));
    if (extra_tag)
        skd__spawn_out_limit(o, extra_tag, extra);
}

TEST(wire)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        skd_sandbox_config c;
        skd__spawn_out o;
        skd__spawn_msg m;
        skd_err err = {0};
        skd_sandbox_config_defaults(&c, NULL);
        skd_limit_set(&c, i, probe_value(i));
        prepare(&o, &c, -1, 0, 0);
        CHECK_EQ_INT(decode(&o, &m, &err), 0);
        for (int j = 0; j < SKD_LIMIT_N; j++)
            CHECK_EQ_INT(skd_limit_get(&m.cfg, j), skd_limit_get(&c, j));
        skd__spawn_msg_free(&m);
        skd__spawn_out_free(&o);
        /* Twice; missing; out of range on either side. */
        prepare(&o, &c, -1, l->tag, probe_value(i));
        CHECK_EQ_INT(decode(&o, &m, &err), SKD_EINVAL);
        CHECK(strstr(err.msg, "twice") != NULL);
        skd__spawn_out_free(&o);
        prepare(&o, &c, i, 0, 0);
        CHECK_EQ_INT(decode(&o, &m, &err), SKD_EINVAL);
        skd__spawn_out_free(&o);
        prepare(&o, &c, i, l->tag, l->max + 1);
        CHECK_EQ_INT(decode(&o, &m, &err), SKD_EINVAL);
        CHECK(strstr(err.msg, l->key) != NULL);
        skd__spawn_out_free(&o);
        prepare(&o, &c, i, l->tag, l->min - 1);
        CHECK_EQ_INT(decode(&o, &m, &err), SKD_EINVAL);
        skd__spawn_out_free(&o);
    }
    skd_sandbox_config c;
    skd__spawn_out o;
    skd__spawn_msg m;
    skd_err err = {0};
    skd_sandbox_config_defaults(&c, NULL);
    prepare(&o, &c, -1, 4242, 1);
    CHECK_EQ_INT(decode(&o, &m, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "unknown limit tag") != NULL);
    skd__spawn_out_free(&o);
}

/* ---- enforcement by the native provider ---- */

static skd_runner *R;
static char WS[64];

struct done {
    int done;
    skd_sandbox_result res;
};

static void on_done(void *arg, skd_sandbox_result *res)
{
    struct done *d = arg;
    d->res = *res;
    __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
}

/* The host pid of the sandboxed "sleep <token>", or -1. */
static long find_sleep(const char *token)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    long pid = -1;
    while (d && pid < 0 && (de = readdir(d))) {
        char p[300], buf[128];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (k > 6 && memcmp(buf, "sleep", 6) == 0 && (buf[k] = '\0', strcmp(buf + 6, token) == 0))
            pid = strtol(de->d_name, NULL, 10);
    }
    if (d)
        closedir(d);
    return pid;
}

/* Read a whole small file into buf; "" when it cannot be read. */
static const char *slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* The value of the cgroup file of the process pid for controller ctl
 * (v1: its hierarchy; v2: the unified one, ctl ignored), or "". */
static const char *cgroup_file(long pid, const char *ctl, const char *v1, const char *v2, char *out,
                               size_t cap)
{
    char p[PATH_MAX], lines[2048], mine[PATH_MAX] = "";
    snprintf(p, sizeof(p), "/proc/%ld/cgroup", pid);
    /* Lines are "id:controllers:path"; v2's is "0::path". */
    slurp(p, lines, sizeof(lines));
    char *save = NULL;
    for (char *l = lines; l && *l; l = save) {
        save = strchr(l, '\n');
        if (save)
            *save++ = '\0';
        char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctls = c1 + 1;
        size_t n = strlen(ctl);
        const char *hit = strstr(ctls, ctl);
        if (hit && (hit == ctls || hit[-1] == ',') && (hit[n] == '\0' || hit[n] == ','))
            snprintf(mine, sizeof(mine), "/sys/fs/cgroup/%s%s/%s", ctls, c2 + 1, v1);
        else if (!ctls[0] && !mine[0])
            snprintf(mine, sizeof(mine), "/sys/fs/cgroup%s/%s", c2 + 1, v2);
    }
    slurp(mine, out, cap);
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
    return out;
}

/* A row's probe: run a sandbox with the row at v and check it took hold. */
typedef void (*probe_fn)(const char *tap_case, int64_t v);

/* A run of "sleep <token>" kept alive while it is looked at from outside. */
struct live {
    struct done d;
    char id[SKD_UUID_LEN + 1];
    long pid;
};

static int live_start(struct live *lv, const skd_sandbox_config *c, const char *token)
{
    const char *argv[] = {"sleep", token, NULL};
    skd_sandbox_spec spec = {.argv = argv, .config = c, .workspace = WS, .key_id = "limits"};
    skd_err err = {0};
    memset(lv, 0, sizeof(*lv));
    lv->pid = -1;
    if (skd_sandbox_start(R, &spec, on_done, &lv->d, lv->id, &err)) {
        printf("# start: %s\n", skd_err_msg(&err));
        return -1;
    }
    for (int i = 0; i < 1000 && lv->pid < 0 && !__atomic_load_n(&lv->d.done, __ATOMIC_ACQUIRE);
         i++) {
        lv->pid = find_sleep(token);
        if (lv->pid < 0)
            usleep(10000);
    }
    return lv->pid > 0 ? 0 : -1;
}

static void live_stop(struct live *lv)
{
    skd_runner_kill(R, lv->id);
    while (!__atomic_load_n(&lv->d.done, __ATOMIC_ACQUIRE))
        usleep(5000);
    if (lv->d.res.error)
        printf("# run: %s\n", lv->d.res.message);
    skd_sandbox_result_free(&lv->d.res);
}

/* The config of a probe: the defaults with row id at v. */
static skd_sandbox_config with(int id, int64_t v)
{
    skd_sandbox_config c = sbt_cfg();
    skd_limit_set(&c, id, v);
    return c;
}

/* Start a live run with row id at v; body checks what the kernel holds for
 * it (lv.pid is its host pid), then the run is killed. */
#define LIVE_CHECK(id, v, token, body)                                                             \
    do {                                                                                           \
        struct live lv;                                                                            \
        skd_sandbox_config c = with(id, v);                                                        \
        CHECK_EQ_INT(live_start(&lv, &c, token), 0);                                               \
        if (lv.pid > 0) {                                                                          \
            char p[128], buf[8192], want[128];                                                     \
            (void)p, (void)buf, (void)want;                                                        \
            body;                                                                                  \
        }                                                                                          \
        live_stop(&lv);                                                                            \
    } while (0)

static void probe_cpu_limit(const char *tap_case, int64_t v)
{
    LIVE_CHECK(SKD_LIMIT_CPU, v, "101.1", {
        cgroup_file(lv.pid, "cpu", "cpu.cfs_quota_us", "cpu.max", buf, sizeof(buf));
        snprintf(want, sizeof(want), "%lld", (long long)v * 1000);
        printf("# cpu: %s\n", buf);
        CHECK(strncmp(buf, want, strlen(want)) == 0 &&
              (buf[strlen(want)] == '\0' || buf[strlen(want)] == ' '));
    });
}

static void probe_memory_limit(const char *tap_case, int64_t v)
{
    LIVE_CHECK(SKD_LIMIT_MEMORY, v, "101.2", {
        cgroup_file(lv.pid, "memory", "memory.limit_in_bytes", "memory.max", buf, sizeof(buf));
        printf("# memory: %s\n", buf);
        CHECK_EQ_INT(strtoll(buf, NULL, 10), v << 20);
    });
}

static void probe_pids_limit(const char *tap_case, int64_t v)
{
    LIVE_CHECK(SKD_LIMIT_PIDS, v, "101.3", {
        cgroup_file(lv.pid, "pids", "pids.max", "pids.max", buf, sizeof(buf));
        printf("# pids: %s\n", buf);
        CHECK_EQ_INT(strtoll(buf, NULL, 10), v);
    });
}

static void probe_file_size_limit(const char *tap_case, int64_t v)
{
    LIVE_CHECK(SKD_LIMIT_FILE_SIZE, v, "101.4", {
        snprintf(p, sizeof(p), "/proc/%ld/limits", lv.pid);
        snprintf(want, sizeof(want), "Max file size             %lld", (long long)v);
        CHECK(strstr(slurp(p, buf, sizeof(buf)), want) != NULL);
    });
}

/* The options of the live process's mount at path (" /tmp "), or "". */
static const char *mount_opts(long pid, const char *path, char *buf, size_t cap)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%ld/mounts", pid);
    slurp(p, buf, cap);
    const char *m = strstr(buf, path);
    return m ? m : "";
}

static void probe_tmp_size(const char *tap_case, int64_t v)
{
    LIVE_CHECK(SKD_LIMIT_TMP, v, "101.5", {
        snprintf(want, sizeof(want), "size=%lldk", (long long)v >> 10);
        CHECK(strstr(mount_opts(lv.pid, " /tmp tmpfs ", buf, sizeof(buf)), want) != NULL);
    });
}

static void probe_read_only(const char *tap_case, int64_t v)
{
    /* readOnly false is asked for, and native keeps the root read-only
     * anyway (docs/sandbox.md): the root mount says "ro". */
    LIVE_CHECK(SKD_LIMIT_READ_ONLY, v, "101.6", {
        const char *m = mount_opts(lv.pid, " / ", buf, sizeof(buf));
        const char *sp = strchr(m + 3, ' ');
        CHECK(sp && strncmp(sp + 1, "ro", 2) == 0);
    });
}

static void probe_workspace_read_only(const char *tap_case, int64_t v)
{
    LIVE_CHECK(SKD_LIMIT_WS_READ_ONLY, v, "101.7", {
        const char *m = mount_opts(lv.pid, " /workspace ", buf, sizeof(buf));
        const char *sp = strchr(m + 12, ' ');
        CHECK(sp && strncmp(sp + 1, v ? "ro" : "rw", 2) == 0);
    });
}

static void probe_network_enabled(const char *tap_case, int64_t v)
{
    /* With it the proxy is the way out (the environment names it); without
     * it there is no proxy. Either way only the loopback exists. */
    LIVE_CHECK(SKD_LIMIT_NETWORK, v, "101.8", {
        snprintf(p, sizeof(p), "/proc/%ld/environ", lv.pid);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            close(fd);
        int proxy = 0;
        for (ssize_t at = 0; at < n; at += (ssize_t)strlen(buf + at) + 1)
            proxy |= strncmp(buf + at, "HTTP_PROXY=", 11) == 0;
        CHECK_EQ_INT(proxy, v);
        snprintf(p, sizeof(p), "/proc/%ld/net/dev", lv.pid);
        slurp(p, buf, sizeof(buf));
        CHECK(strstr(buf, "lo:") != NULL && strstr(buf, "eth") == NULL);
    });
}

static void probe_timeout_ms(const char *tap_case, int64_t v)
{
    skd_sandbox_config c = with(SKD_LIMIT_TIMEOUT, v);
    const char *argv[] = {"sleep", "30", NULL};
    skd_sandbox_result res;
    CHECK_EQ_INT(sbt_run(R, argv, &c, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.timed_out, 1);
    CHECK_EQ_INT(res.killed, 1);
    skd_sandbox_result_free(&res);
}

static void probe_output_limit(const char *tap_case, int64_t v)
{
    skd_sandbox_config c = with(SKD_LIMIT_OUTPUT, v);
    const char *argv[] = {"sh", "-c", "printf '%0100d' 0", NULL};
    skd_sandbox_result res;
    CHECK_EQ_INT(sbt_run(R, argv, &c, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.out_len, v);
    CHECK_EQ_INT(res.out_total, 100);
    CHECK_EQ_INT(res.truncated, 1);
    skd_sandbox_result_free(&res);
}

/* One probe per row: a row without one is a compile error here. */
static const probe_fn probes[SKD_LIMIT_N] = {
#define PROBE(ID, field, ...) [SKD_LIMIT_##ID] = probe_##field,
    SKD_SANDBOX_LIMITS(PROBE)
#undef PROBE
};

TEST(native_enforces_every_row)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        printf("# %s = %lld\n", skd_limits[i].key, (long long)probe_value(i));
        probes[i](tap_case, probe_value(i));
    }
}

/* ---- docs/sandbox.md ---- */

/* The limits table of docs/sandbox.md, as the rows make it. */
static void render(char *out, size_t cap)
{
    size_t len = 0;
#define PUT(...) len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, __VA_ARGS__)
    PUT("| field | manifest | meaning | range | default | ceiling (the operator's) |\n");
    PUT("|---|---|---|---|---|---|\n");
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        int b = l->kind == SKD_LIMIT_BOOL;
        PUT("| `%s` |", l->key);
        if (l->mkey)
            PUT(" `%s`", l->mkey);
        PUT(" | %s | ", l->doc);
        if (b)
            PUT("true, false | ");
        else
            PUT("%lld to %lld | ", (long long)l->min, (long long)l->max);
        if (l->def_env)
            PUT("`%s` ", l->def_env);
        if (b)
            PUT("%s | ", l->def ? "true" : "false");
        else
            PUT("%lld | ", (long long)(l->def_env ? l->def : l->def * l->scale));
        if (l->ceil_env && b)
            PUT("`%s` %s: `true` is `forbidden` ", l->ceil_env, l->ceil ? "true" : "false");
        else if (l->ceil_env)
            PUT("`%s` %lld%s%s%s ", l->ceil_env, (long long)l->ceil, l->auto0[0] ? " (0: " : "",
                l->auto0, l->auto0[0] ? ")" : "");
        PUT("|\n");
    }
#undef PUT
}

TEST(docs_table_is_the_rows)
{
    static char doc[65536], want[8192];
    const char *root = getenv("SKILLD_ROOT");
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/docs/sandbox.md", root ? root : ".");
    slurp(path, doc, sizeof(doc));
    render(want, sizeof(want));
    const char *at = strstr(doc, want);
    CHECK(at != NULL);
    if (!at)
        printf("# docs/sandbox.md should hold the table that `%s --docs-table` prints\n",
               "build/tests/test_sandbox_limits");
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--docs-table") == 0) {
        static char table[8192];
        render(table, sizeof(table));
        fputs(table, stdout);
        return 0;
    }
    sbt_maybe_reexec(argc, argv);
    TAP_BEGIN("test_sandbox_limits");
    RUN(rows_are_sane);
    RUN(config_ceiling_and_clamp);
    RUN(json_and_manifest);
    RUN(wire);
    RUN(docs_table_is_the_rows);
    skd_config *cfg = skd_config_new();
    skd_err err = {0};
    snprintf(WS, sizeof(WS), "/tmp/skd-limits.XXXXXX");
    if (!cfg || !mkdtemp(WS) ||
        skd_config_set(cfg, "SKILLS_SANDBOX_NETWORK_ENABLED", "true", &err) ||
        skd_config_set(cfg, "SKILLS_SANDBOX_WORKSPACE_QUOTA", "off", &err) ||
        skd_config_set(cfg, "DATA_DIR", WS, &err) || skd_runner_new(cfg, NULL, &R, &err)) {
        printf("FAIL test_sandbox_limits: setup: %s\n", skd_err_msg(&err));
        return 1;
    }
    RUN(native_enforces_every_row);
    skd_runner_free(R);
    skd_config_free(cfg);
    rmdir(WS);
    return TAP_END();
}
