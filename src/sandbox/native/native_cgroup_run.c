/*
 * One native run's cgroup (native_cgroup.c sets up the tree it lives in):
 * made as "<...>/skilld/<spawner pid>/<run id>" before the process starts,
 * its limits written (the native provider's enforcement of cpuLimit,
 * memoryLimit with swap off, and pidsLimit from include/skilld/limits.h;
 * ahead of the run for a pre-made sandbox), killed as a whole, read for
 * OOM kills, and removed after the run. Fail closed: a limit that cannot
 * be written refuses the run.
 *
 * Trust: the files read here are the kernel's; run ids are UUIDs made by
 * the runner, so paths are never built from client text.
 */
#include "sandbox/native/native.h"
#include "sandbox/native/native_cgroup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The limit files a run's limits are written to (limits_v1, limits_v2);
 * v2 has no period file and writes cpu.max as L_CPU_QUOTA. */
enum lim { L_MEM, L_MEMSW, L_PIDS, L_CPU_PERIOD, L_CPU_QUOTA, L_COUNT };

struct skd__cgroup {
    char dir[C_COUNT][PATH_MAX]; /* v2: dir[0] only */
    int n;
    int fd;                  /* v2: the run's directory, for CLONE_INTO_CGROUP; else -1 */
    int lim_fd[L_COUNT];     /* limit files opened ahead (skd__cgroup_open_limits), or -1 */
    int oom_fd;              /* its OOM counter file opened ahead (read-only), or -1 */
    int ahead_mode;          /* skd__cgroup_write_ahead is writing: keep the descriptors */
    char ahead[L_COUNT][40]; /* the value written ahead through lim_fd[i], or "" */
};

/* write_file for limit idx: through the descriptor opened ahead when there
 * is one (then closed: each limit is written once), else by path. A value
 * that was written ahead (skd__cgroup_write_ahead) is in the file already
 * and is not written again. While writing ahead, the descriptor stays open
 * and the value is remembered. */
static int write_limit(skd__cgroup *cg, int idx, const char *dir, const char *file, const char *val)
{
    int fd = cg->lim_fd[idx];
    size_t len = strlen(val);
    if (cg->ahead_mode) {
        if (fd < 0) { /* as a path that is not there (v2 without swap accounting) */
            errno = ENOENT;
            return -1;
        }
        if (len >= sizeof(cg->ahead[idx]) || skd_write_all(fd, val, len))
            return -1;
        memcpy(cg->ahead[idx], val, len + 1);
        return 0;
    }
    int same = cg->ahead[idx][0] && strcmp(cg->ahead[idx], val) == 0;
    cg->ahead[idx][0] = '\0';
    if (fd < 0)
        return same ? 0 : skd__cg_write_file(dir, file, val);
    cg->lim_fd[idx] = -1;
    int rc = same ? 0 : skd_write_all(fd, val, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc ? -1 : 0;
}

/* 1 when the machine has swap that memory limits without memsw would miss. */
static int swap_present(void)
{
    char buf[512];
    if (skd__cg_read_file("/proc", "swaps", buf, sizeof(buf)))
        return 1;
    return strchr(buf, '\n') && strchr(buf, '\n')[1] != '\0';
}

static int limits_v2(skd__cgroup *cg, const skd_sandbox_config *cfg, const char **step)
{
    char v[64];
    snprintf(v, sizeof(v), "%lld", (long long)cfg->memory_limit << 20);
    if (*step = "memory.max", write_limit(cg, L_MEM, cg->dir[0], "memory.max", v))
        return -1;
    if (*step = "memory.swap.max", write_limit(cg, L_MEMSW, cg->dir[0], "memory.swap.max", "0") &&
                                       (errno != ENOENT || swap_present()))
        return -1;
    snprintf(v, sizeof(v), "%lld", (long long)cfg->pids_limit);
    if (*step = "pids.max", write_limit(cg, L_PIDS, cg->dir[0], "pids.max", v))
        return -1;
    snprintf(v, sizeof(v), "%lld 100000", (long long)cfg->cpu_limit * 1000);
    if (*step = "cpu.max", write_limit(cg, L_CPU_QUOTA, cg->dir[0], "cpu.max", v))
        return -1;
    return 0;
}

static int limits_v1(skd__cgroup *cg, const skd_sandbox_config *cfg, const char **step)
{
    char v[64];
    snprintf(v, sizeof(v), "%lld", (long long)cfg->memory_limit << 20);
    /* The memory limit may never be above memory+swap's: when the value
     * written ahead is lower than this run's, memsw is raised first. */
    int memsw_first = skd__cg.has_memsw && !cg->ahead_mode && cg->ahead[L_MEMSW][0] &&
                      strtoll(cg->ahead[L_MEMSW], NULL, 10) < (long long)cfg->memory_limit << 20;
    if (memsw_first &&
        (*step = "memory.memsw.limit_in_bytes",
         write_limit(cg, L_MEMSW, cg->dir[C_MEMORY], "memory.memsw.limit_in_bytes", v)))
        return -1;
    if (*step = "memory.limit_in_bytes",
        write_limit(cg, L_MEM, cg->dir[C_MEMORY], "memory.limit_in_bytes", v))
        return -1;
    if (skd__cg.has_memsw) {
        if (!memsw_first &&
            (*step = "memory.memsw.limit_in_bytes",
             write_limit(cg, L_MEMSW, cg->dir[C_MEMORY], "memory.memsw.limit_in_bytes", v)))
            return -1;
    } else if (swap_present()) {
        *step = "memory.memsw.limit_in_bytes (swap is on and cannot be limited)";
        errno = ENOTSUP;
        return -1;
    }
    snprintf(v, sizeof(v), "%lld", (long long)cfg->pids_limit);
    if (*step = "pids.max", write_limit(cg, L_PIDS, cg->dir[C_PIDS], "pids.max", v))
        return -1;
    if (*step = "cpu.cfs_period_us",
        write_limit(cg, L_CPU_PERIOD, cg->dir[C_CPU], "cpu.cfs_period_us", "100000"))
        return -1;
    snprintf(v, sizeof(v), "%lld", (long long)cfg->cpu_limit * 1000);
    if (*step = "cpu.cfs_quota_us",
        write_limit(cg, L_CPU_QUOTA, cg->dir[C_CPU], "cpu.cfs_quota_us", v))
        return -1;
    return 0;
}

int skd__cgroup_create_bare(const char *id, skd__cgroup **out, skd_err *err)
{
    *out = NULL;
    int rc = skd__cgroup_detect(err);
    if (rc)
        return rc;
    skd__cgroup *cg = calloc(1, sizeof(*cg));
    if (!cg)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    cg->fd = cg->oom_fd = -1;
    for (int i = 0; i < L_COUNT; i++)
        cg->lim_fd[i] = -1;
    int n = skd__cg.version == 2 ? 1 : skd__cg.nctl;
    const char *step = "mkdir";
    for (int c = 0; c < n; c++) {
        cg->n = c;                 /* directories below n are made or skipped (dir "") */
        if (!skd__cg.parent[c][0]) /* a v1 controller not in use */
            continue;
        if (snprintf(cg->dir[c], sizeof(cg->dir[c]), "%s/%s", skd__cg.parent[c], id) >=
                (int)sizeof(cg->dir[c]) ||
            mkdir(cg->dir[c], 0755) != 0)
            goto fail;
        cg->n = c + 1;
    }
    cg->n = n;
    if (skd__cg.version == 2 &&
        (step = "open", cg->fd = open(cg->dir[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        goto fail;
    *out = cg;
    return 0;
fail:
    rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: cgroup %s: %s (%s)", step, strerror(errno),
                     skd__cgroup_describe());
    skd__cgroup_destroy(cg);
    return rc;
}

int skd__cgroup_apply(skd__cgroup *cg, const skd_sandbox_config *cfg, skd_err *err)
{
    const char *step = "limits";
    if ((skd__cg.version == 2 ? limits_v2 : limits_v1)(cg, cfg, &step) == 0)
        return 0;
    return skd_err_set(err, SKD_ESANDBOX, "native sandbox: cgroup %s: %s (%s)", step,
                       strerror(errno), skd__cgroup_describe());
}

void skd__cgroup_write_ahead(skd__cgroup *cg, const skd_sandbox_config *cfg)
{
    if (!cg)
        return;
    const char *step = "limits";
    cg->ahead_mode = 1;
    /* A step that fails leaves the ones before it written and remembered
     * (an entry is set only after a whole write, which the kernel takes or
     * refuses as one): apply then knows what the files hold, and on v1
     * still raises memory+swap before memory. */
    (void)(skd__cg.version == 2 ? limits_v2 : limits_v1)(cg, cfg, &step);
    cg->ahead_mode = 0;
}

void skd__cgroup_open_limits(skd__cgroup *cg)
{
    static const char *const v1[L_COUNT] = {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes",
                                            "pids.max", "cpu.cfs_period_us", "cpu.cfs_quota_us"};
    static const char *const v2[L_COUNT] = {"memory.max", "memory.swap.max", "pids.max", NULL,
                                            "cpu.max"};
    static const int v1_ctl[L_COUNT] = {C_MEMORY, C_MEMORY, C_PIDS, C_CPU, C_CPU};
    for (int i = 0; cg && i < L_COUNT; i++) {
        const char *file = skd__cg.version == 2 ? v2[i] : v1[i];
        const char *dir = cg->dir[skd__cg.version == 2 ? 0 : v1_ctl[i]];
        char p[PATH_MAX];
        if (!file || cg->lim_fd[i] >= 0 || !dir[0] ||
            snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
            continue;
        /* A file that is not there (no swap accounting) stays -1, and the
         * limit's own path then decides, as without this. */
        cg->lim_fd[i] = open(p, O_WRONLY | O_CLOEXEC);
    }
    /* The OOM counter, read once after the run (skd__cgroup_oom_killed). */
    char p[PATH_MAX];
    if (cg && cg->oom_fd < 0 &&
        snprintf(p, sizeof(p), "%s/%s", cg->dir[skd__cg.version == 2 ? 0 : C_MEMORY],
                 skd__cg.version == 2 ? "memory.events" : "memory.oom_control") < (int)sizeof(p))
        cg->oom_fd = open(p, O_RDONLY | O_CLOEXEC);
}

int skd__cgroup_create(const char *id, const skd_sandbox_config *cfg, skd__cgroup **out,
                       skd_err *err)
{
    int rc = skd__cgroup_create_bare(id, out, err);
    if (rc == 0 && (rc = skd__cgroup_apply(*out, cfg, err)) != 0) {
        skd__cgroup_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int skd__cgroup_clone_fd(const skd__cgroup *cg)
{
    return cg ? cg->fd : -1;
}

int skd__cgroup_join_fds(const skd__cgroup *cg, int *fds, int cap, skd_err *err)
{
    int n = 0;
    if (skd__cg.version != 1)
        return 0;
    for (int c = 0; c < cg->n; c++) {
        char p[PATH_MAX];
        int fd = -1;
        if (!cg->dir[c][0])
            continue;
        if (n >= cap || snprintf(p, sizeof(p), "%s/tasks", cg->dir[c]) >= (int)sizeof(p) ||
            (fd = open(p, O_WRONLY | O_CLOEXEC)) < 0) {
            int saved = errno;
            while (n > 0)
                close(fds[--n]);
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: open %s/tasks: %s", cg->dir[c],
                               strerror(saved));
        }
        fds[n++] = fd;
    }
    return n;
}

void skd__cgroup_kill(skd__cgroup *cg)
{
    if (!cg || !cg->n)
        return;
    if (skd__cg.version == 2 && skd__cg.has_kill &&
        skd__cg_write_file(cg->dir[0], "cgroup.kill", "1") == 0)
        return;
    /* No freezer: every process of a run is in the pid namespace whose init
     * native_kill has just sent SIGKILL, and the kernel kills the whole
     * namespace with its init (no fork outruns that: the namespace takes
     * no new pid once its init is dying). This kill of what the cgroup
     * lists is a second net. Freezing first would open a window in which
     * our own death (the parent-death signal of a killed server, arriving
     * during shutdown) leaves the run frozen for good, with SIGKILL
     * pending and its memory held, until another skilld thaws it. */
    skd__cg_kill_procs(cg->dir[skd__cg.version == 2 ? 0 : C_PIDS]);
}

/* The number after "key " in a "key value" per line file, or -1. */
static long long keyed_in(const char *buf, const char *key)
{
    size_t kl = strlen(key);
    for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
            return strtoll(l + kl + 1, NULL, 10);
    return -1;
}

static long long keyed(const char *dir, const char *file, const char *key)
{
    char buf[4096];
    if (skd__cg_read_file(dir, file, buf, sizeof(buf)))
        return -1;
    return keyed_in(buf, key);
}

/* keyed for the OOM counter, through the descriptor opened ahead when
 * there is one (then closed: it is read once). */
static long long oom_count(skd__cgroup *cg, const char *dir, const char *file)
{
    int fd = cg->oom_fd;
    if (fd < 0)
        return keyed(dir, file, "oom_kill");
    cg->oom_fd = -1;
    char buf[4096];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    if (n < 0)
        return keyed(dir, file, "oom_kill");
    buf[n] = '\0';
    return keyed_in(buf, "oom_kill");
}

int skd__cgroup_oom_killed(skd__cgroup *cg)
{
    if (!cg || !cg->n)
        return 0;
    if (skd__cg.version == 2)
        return oom_count(cg, cg->dir[0], "memory.events") > 0;
    long long n = oom_count(cg, cg->dir[C_MEMORY], "memory.oom_control");
    if (n >= 0)
        return n > 0;
    char buf[64];
    if (skd__cg_read_file(cg->dir[C_MEMORY], "memory.failcnt", buf, sizeof(buf)))
        return 0;
    return strtoll(buf, NULL, 10) > 0;
}

/* The number in dir/file (a file of one number), or -1. */
static long long number_in(const char *dir, const char *file)
{
    char buf[64];
    if (!dir[0] || skd__cg_read_file(dir, file, buf, sizeof(buf)))
        return -1;
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    return end != buf && v >= 0 ? v : -1;
}

void skd__cgroup_usage(skd__cgroup *cg, int64_t *cpu_us, int64_t *mem_peak)
{
    *cpu_us = *mem_peak = -1;
    if (!cg || !cg->n)
        return;
    if (skd__cg.version == 2) {
        long long us = keyed(cg->dir[0], "cpu.stat", "usage_usec");
        *cpu_us = us >= 0 ? us : -1;
        /* memory.peak is there from Linux 5.19 */
        *mem_peak = number_in(cg->dir[0], "memory.peak");
        return;
    }
    /* v1: cpuacct's own directory, or cpu's when the two are mounted as one. */
    long long ns =
        number_in(cg->dir[C_CPUACCT][0] ? cg->dir[C_CPUACCT] : cg->dir[C_CPU], "cpuacct.usage");
    *cpu_us = ns >= 0 ? ns / 1000 : -1;
    *mem_peak = number_in(cg->dir[C_MEMORY], "memory.max_usage_in_bytes");
}

long long skd__cgroup_oom_count(skd__cgroup *cg)
{
    if (!cg || !cg->n)
        return 0;
    long long n = skd__cg.version == 2 ? keyed(cg->dir[0], "memory.events", "oom_kill")
                                       : keyed(cg->dir[C_MEMORY], "memory.oom_control", "oom_kill");
    char buf[64];
    if (n < 0 && skd__cg.version == 1 &&
        skd__cg_read_file(cg->dir[C_MEMORY], "memory.failcnt", buf, sizeof(buf)) == 0)
        n = strtoll(buf, NULL, 10);
    return n < 0 ? 0 : n;
}

void skd__cgroup_destroy(skd__cgroup *cg)
{
    if (!cg)
        return;
    if (cg->fd >= 0)
        close(cg->fd);
    if (cg->oom_fd >= 0)
        close(cg->oom_fd);
    for (int i = 0; i < L_COUNT; i++)
        if (cg->lim_fd[i] >= 0)
            close(cg->lim_fd[i]);
    for (int c = cg->n - 1; c >= 0; c--) {
        if (!cg->dir[c][0])
            continue;
        /* The pid namespace is gone when its init is reaped, but the
         * kernel may still be tearing tasks down: retry briefly. */
        for (int i = 0; i < 50 && rmdir(cg->dir[c]) != 0 && errno == EBUSY; i++) {
            if (i == 0)
                skd__cgroup_kill(cg);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    free(cg);
}

int skd__cgroup_freeze(skd__cgroup *cg, int on)
{
    if (!cg || !cg->n)
        return -1;
    const char *dir = skd__cg.version == 2 ? cg->dir[0] : cg->dir[C_FREEZER];
    const char *file = skd__cg.version == 2 ? "cgroup.freeze" : "freezer.state";
    const char *val = skd__cg.version == 2 ? (on ? "1" : "0") : (on ? "FROZEN" : "THAWED");
    if (!dir[0] || skd__cg_write_file(dir, file, val) != 0)
        return -1;
    if (!on)
        return 0;
    /* Wait until every task is frozen (a task in a system call gets there
     * when it returns), 2 s at most. */
    for (int i = 0; i < 400; i++) {
        char buf[256];
        if (skd__cg.version == 2 ? skd__cg_read_file(dir, "cgroup.events", buf, sizeof(buf)) == 0 &&
                                       keyed_in(buf, "frozen") == 1
                                 : skd__cg_read_file(dir, "freezer.state", buf, sizeof(buf)) == 0 &&
                                       strncmp(buf, "FROZEN", 6) == 0)
            return 0;
        usleep(5000);
    }
    return -1;
}
