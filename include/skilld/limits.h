/*
 * The sandbox limits: one row per limit, and everything that knows a limit
 * is generated from these rows or checked against them (STYLE.md 16):
 *   - the fields of skd_sandbox_config (skilld/sandbox.h);
 *   - the settings of the default and of the ceiling in the configuration
 *     table (src/core/config.c), so `skilld --print-config` lists them;
 *   - the JSON form of a call's sandbox config and its range checks
 *     (skd_sandbox_config_from_json), the manifest's run.* keys
 *     (src/lib/manifest.c) and the flags of `skilld exec`;
 *   - the ceiling check and clamp (src/sandbox/limits.c), made where a run
 *     enters the runner and again where the spawner decodes it;
 *   - the spawner protocol's tagged limit fields (spawner_proto.h);
 *   - `skilld doctor`'s sandbox_limits line and docs/sandbox.md's table
 *     (tests/unit/test_sandbox_limits.c checks the page against the rows).
 * Adding a limit is one row here plus its enforcement in each provider
 * (native_cgroup.c / native_child.c, docker.c).
 *
 * A row: X(ID, field, kind, key, mkey, flag, def_env, def, ceil_env, ceil,
 *          auto0, min, max, scale, unit, tag, doc)
 *   ID        SKD_LIMIT_<ID>, the row's index
 *   field     the member of skd_sandbox_config
 *   kind      INT (int64_t) or BOOL (int, 0 or 1)
 *   key       the name in a call's sandbox config (OmniRoute's where it has one)
 *   mkey      the name in a manifest's "run" object, or NULL: not settable there
 *   flag      the `skilld exec` flag, or NULL (a BOOL flag takes no value)
 *   def_env   the setting of the default, or NULL: the built-in default only
 *   def       the default, in the settings' unit (field value = def x scale)
 *   ceil_env  the setting of the operator's ceiling, or NULL: the ceiling is max
 *   ceil      the ceiling's default, in the settings' unit
 *   auto0     "" or what a ceiling setting of 0 stands for (then 0 is accepted)
 *   min, max  the range of the field, in its own unit: what a caller may ask
 *             for at all and what the wire accepts
 *   scale     field units per settings unit (1, or 1048576 for MiB)
 *   unit      the settings' unit, for help texts
 *   tag       the limit's tag on the spawner wire: unique, never reused (a
 *             tag, not the row's place, names the limit there)
 *   doc       what the field means, in its own unit (the docs table)
 * The order of the rows is the order of the clamped list in a result, of
 * --print-config and of the docs table.
 * For a BOOL row with a ceiling setting the setting is the operator's switch:
 * true is refused (forbidden) unless it is on. A BOOL row is never clamped.
 */
#ifndef SKILLD_LIMITS_H
#define SKILLD_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#define SKD_LIMIT_MIB 1048576LL

/* clang-format off */
#define SKD_SANDBOX_LIMITS(X)                                                                      \
    X(TIMEOUT, timeout_ms, INT, "timeout", "timeoutMs", "--timeout",                               \
      "SKILLS_SANDBOX_TIMEOUT_MS", 10000, "SKILLS_SANDBOX_MAX_TIMEOUT_MS", 60000,                  \
      "", 1, 3600000, 1, "ms", 3,                                                                  \
      "wall-clock ms (`timeoutMs` in skill inputs and manifests)")                                 \
    X(MEMORY, memory_limit, INT, "memoryLimit", "memoryLimit", "--memory",                         \
      "SKILLS_SANDBOX_MEMORY_MB", 512, "SKILLS_SANDBOX_MAX_MEMORY_MB", 1024,                       \
      "", 8, 1048576, 1, "MiB", 2,                                                                 \
      "MiB, swap off")                                                                             \
    X(CPU, cpu_limit, INT, "cpuLimit", "cpuLimit", "--cpu",                                        \
      "SKILLS_SANDBOX_CPU_PERCENT", 100, "SKILLS_SANDBOX_MAX_CPU", 0,                              \
      "the number of cores x 100", 1, 102400, 1, "percent of one CPU", 1,                          \
      "percent of one CPU (cgroup quota; 200 = two CPUs)")                                         \
    X(NETWORK, network_enabled, BOOL, "networkEnabled", "networkEnabled", NULL,                    \
      NULL, false, "SKILLS_SANDBOX_NETWORK_ENABLED", false,                                        \
      "", 0, 1, 1, "true or false", 4,                                                             \
      "a network for the command: the egress proxy on the sandbox's loopback is the only way "     \
      "out ([egress.md](egress.md))")                                                              \
    X(READ_ONLY, read_only, BOOL, "readOnly", NULL, NULL,                                          \
      NULL, true, NULL, true,                                                                      \
      "", 0, 1, 1, "true or false", 5,                                                             \
      "root filesystem read-only (native: always)")                                                \
    X(WS_READ_ONLY, workspace_read_only, BOOL, "workspaceReadOnly", NULL, "--ro-workspace",        \
      NULL, false, NULL, true,                                                                     \
      "", 0, 1, 1, "true or false", 6,                                                             \
      "`/workspace` mounted read-only")                                                            \
    X(PIDS, pids_limit, INT, "pidsLimit", "pidsLimit", "--pids",                                   \
      "SKILLS_SANDBOX_PIDS_LIMIT", 64, "SKILLS_SANDBOX_MAX_PIDS", 256,                             \
      "", 1, 65536, 1, "processes", 7,                                                             \
      "processes and threads")                                                                     \
    X(OUTPUT, output_limit, INT, "outputLimit", "outputLimit", "--output-limit",                   \
      "SKILLS_MAX_SANDBOX_OUTPUT_CHARS", 100000, "SKILLS_SANDBOX_MAX_OUTPUT_BYTES", 1048576,       \
      "", 0, 1073741824, 1, "bytes per stream", 8,                                                 \
      "bytes kept per stream")                                                                     \
    X(FILE_SIZE, file_size_limit, INT, "fileSizeLimit", NULL, NULL,                                \
      NULL, 67108864, NULL, 1099511627776,                                                         \
      "", 1, 1099511627776, 1, "bytes", 9,                                                         \
      "bytes per written file (RLIMIT_FSIZE)")                                                     \
    X(TMP, tmp_size, INT, "tmpSize", "tmpSize", NULL,                                              \
      NULL, 64, "SKILLS_SANDBOX_MAX_TMP_MB", 256,                                                  \
      "", 1048576, 68719476736, SKD_LIMIT_MIB, "MiB", 10,                                          \
      "bytes of the `/tmp` tmpfs (`/dev/shm` at most 64 MiB)")
/* clang-format on */

enum skd_limit_id {
#define SKD__LIMIT_ENUM(ID, ...) SKD_LIMIT_##ID,
    SKD_SANDBOX_LIMITS(SKD__LIMIT_ENUM)
#undef SKD__LIMIT_ENUM
        SKD_LIMIT_N
};

enum skd_limit_kind { SKD_LIMIT_INT, SKD_LIMIT_BOOL };

/* One row, as data (skd_limits[id]). */
typedef struct skd_limit {
    const char *key, *mkey, *flag, *def_env, *ceil_env, *auto0, *unit, *doc;
    int kind;
    int64_t def, ceil, min, max, scale; /* def and ceil in the settings' unit */
    uint32_t tag;
} skd_limit;

extern const skd_limit skd_limits[SKD_LIMIT_N];

/* The row whose key (or, with manifest set, mkey) is name; NULL if none. */
const skd_limit *skd_limit_by_key(const char *name, int manifest);

/* The row index of a wire tag, or -1 for a tag no row has. */
int skd_limit_by_tag(uint32_t tag);

#endif
