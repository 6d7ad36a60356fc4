/*
 * OOM evidence for podman on cgroup v1 hosts.
 *
 * Podman 4.3 with conmon 2.1 on cgroup v1 does not report OOMKilled (its
 * v1 OOM watch misses the kill), and the container's own memory cgroup,
 * where the kernel counts the kill, is deleted when the container stops.
 * So on v1 the podman provider puts each container under a parent cgroup
 * of its own, /sys/fs/cgroup/memory/skilld-podman/<run id>, and applies the
 * memory limit there (memory and memory+swap, both the requested size)
 * instead of with --memory. The limit is the same, and is fail-closed: a
 * limit that cannot be written refuses the run. After the run the parent
 * still exists and tells whether its usage reached the limit
 * (memory.max_usage_in_bytes / memory.memsw.max_usage_in_bytes); a
 * SIGKILLed container that reached its limit was killed by the OOM killer.
 * The parent also holds what the run used (metering, docs/usage.md): v1
 * charges every ancestor as it goes, so the parent's cpuacct.usage and
 * memory.max_usage_in_bytes still count the container once its own cgroup
 * is gone. The parent directories that podman made under every v1
 * controller are removed once the container is gone.
 *
 * skd__ctr_rundir_remove cleans podman's per-run working directory (see
 * docker.c) here too, so that leftovers of a crash can be removed with it.
 *
 * On cgroup v2 nothing here is used: podman's own OOMKilled is reliable
 * there (memory.events) and --memory is passed as usual.
 *
 * Trust: cgroupfs is the kernel's; run ids are UUIDs made by the runner.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/container/container.h"
#include "skilld/util.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CG_MEM CG_ROOT "/memory"
#define CG_PARENT "skilld-podman"

int skd__ctr_cg_v1(void)
{
    return access(CG_MEM "/memory.limit_in_bytes", F_OK) == 0;
}

static int write_str(const char *dir, const char *file, const char *val)
{
    char path[256];
    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return skd_write_small(AT_FDCWD, path, 0, val) ? -1 : 0;
}

static int64_t read_i64(const char *dir, const char *file)
{
    char path[256], buf[64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (skd_read_small(AT_FDCWD, path, 0, buf, sizeof(buf), NULL))
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    int64_t v;
    return skd_parse_i64(buf, 0, INT64_MAX, &v) == 0 ? v : -1;
}

int skd__ctr_cg_make(const char *id, int64_t mem_bytes, char *parent, size_t cap, skd_err *err)
{
    char dir[256], val[32];
    if (mkdir(CG_MEM "/" CG_PARENT, 0755) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_ESANDBOX, "podman: cannot make cgroup %s: %s",
                           CG_MEM "/" CG_PARENT, strerror(errno));
    snprintf(dir, sizeof(dir), "%s/%s/%s", CG_MEM, CG_PARENT, id);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_ESANDBOX, "podman: cannot make cgroup %s: %s", dir,
                           strerror(errno));
    snprintf(val, sizeof(val), "%lld", (long long)mem_bytes);
    /* memory first: memsw may never be below it. */
    if (write_str(dir, "memory.limit_in_bytes", val) != 0) {
        int e = errno;
        skd__ctr_cg_remove(id);
        return skd_err_set(err, SKD_ESANDBOX, "podman: cannot set the memory limit: %s",
                           strerror(e));
    }
    if (write_str(dir, "memory.memsw.limit_in_bytes", val) != 0) {
        int e = errno;
        skd__ctr_cg_remove(id);
        return skd_err_set(err, SKD_ESANDBOX,
                           "podman: cannot limit memory+swap (swap accounting off? boot with "
                           "swapaccount=1): %s",
                           strerror(e));
    }
    snprintf(parent, cap, "/%s/%s", CG_PARENT, id);
    return 0;
}

int skd__ctr_cg_hit_limit(const char *id)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/%s/%s", CG_MEM, CG_PARENT, id);
    int64_t lim = read_i64(dir, "memory.limit_in_bytes");
    int64_t max = read_i64(dir, "memory.max_usage_in_bytes");
    int64_t sw_lim = read_i64(dir, "memory.memsw.limit_in_bytes");
    int64_t sw_max = read_i64(dir, "memory.memsw.max_usage_in_bytes");
    return (lim > 0 && max >= lim) || (sw_lim > 0 && sw_max >= sw_lim);
}

void skd__ctr_cg_usage(const char *id, int64_t *cpu_us, int64_t *mem_peak)
{
    char dir[256];
    *cpu_us = *mem_peak = 0;
    /* cpuacct on its own, or mounted with cpu (either name) */
    static const char *const acct[] = {"cpuacct", "cpu,cpuacct", "cpuacct,cpu"};
    for (size_t i = 0; i < sizeof(acct) / sizeof(acct[0]); i++) {
        snprintf(dir, sizeof(dir), "%s/%s/%s/%s", CG_ROOT, acct[i], CG_PARENT, id);
        int64_t ns = read_i64(dir, "cpuacct.usage");
        if (ns >= 0) {
            *cpu_us = ns / 1000;
            break;
        }
    }
    snprintf(dir, sizeof(dir), "%s/%s/%s", CG_MEM, CG_PARENT, id);
    int64_t peak = read_i64(dir, "memory.max_usage_in_bytes");
    *mem_peak = peak > 0 ? peak : 0;
}

void skd__ctr_cg_remove(const char *id)
{
    DIR *d = opendir(CG_ROOT);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char dir[PATH_MAX], sub[PATH_MAX + 16];
        snprintf(dir, sizeof(dir), "%s/%s/%s/%s", CG_ROOT, de->d_name, CG_PARENT, id);
        snprintf(sub, sizeof(sub), "%s/conmon", dir);
        rmdir(sub);
        rmdir(dir);
    }
    closedir(d);
}

void skd__ctr_rundir_remove(const char *id)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", SKD__CTR_RUNDIR, id);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(fd, de->d_name, 0);
        if (d)
            closedir(d);
        else
            close(fd);
    }
    rmdir(dir);
}
