/*
 * cgroups for native sandboxes: this file finds and sets up the tree
 * (which version, which controllers, our "<server's cgroup>/skilld/<pid>"
 * directory, what a crashed server left) and releases it at exit;
 * native_cgroup_run.c makes, limits, kills and removes each run's cgroup.
 * cgroup v2: memory.max, memory.swap.max, pids.max, cpu.max, cgroup.kill,
 * memory.events; cgroup v1: memory.limit_in_bytes,
 * memory.memsw.limit_in_bytes, pids.max, cpu.cfs_quota_us, freezer,
 * memory.oom_control.
 *
 * Trust: the files read here are the kernel's; run ids are UUIDs made by the
 * runner, so paths are never built from client text.
 */
#include "sandbox/native/native.h"
#include "sandbox/native/native_cgroup_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const ctl_names[C_COUNT] = {"memory", "pids", "cpu", "freezer"};

struct skd__cg_tree skd__cg;
static pthread_once_t once = PTHREAD_ONCE_INIT;

int skd__cg_write_file(const char *dir, const char *file, const char *val)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, val, strlen(val));
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(val) ? 0 : -1;
}

int skd__cg_read_file(const char *dir, const char *file, char *buf, size_t cap)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
        return -1;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

static int exists(const char *dir, const char *file)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/%s", dir, file) >= (int)sizeof(p))
        return 0;
    return access(p, F_OK) == 0;
}

/* /proc/self/cgroup and /proc/self/mountinfo, read once per set-up (a v1
 * set-up asks for each of four controllers, plus the freezer's stale runs)
 * and parsed from memory; cache_drop when our cgroup may have changed. */
static struct {
    char *text[2];
    size_t len[2];
} cache;

static void cache_drop(void)
{
    for (int i = 0; i < 2; i++) {
        free(cache.text[i]);
        cache.text[i] = NULL;
        cache.len[i] = 0;
    }
}

/* A stream of file i (0: /proc/self/cgroup, 1: /proc/self/mountinfo). */
static FILE *cached(int i)
{
    static const char *const names[2] = {"/proc/self/cgroup", "/proc/self/mountinfo"};
    if (!cache.text[i]) {
        FILE *f = fopen(names[i], "re");
        if (!f)
            return NULL;
        char *buf = NULL;
        size_t len = 0, cap = 0, n;
        char chunk[4096];
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
            if (len + n > cap) {
                char *nb = realloc(buf, cap = (len + n) * 2);
                if (!nb) {
                    free(buf);
                    fclose(f);
                    return NULL;
                }
                buf = nb;
            }
            memcpy(buf + len, chunk, n);
            len += n;
        }
        fclose(f);
        if (!len) {
            free(buf);
            return NULL;
        }
        cache.text[i] = buf;
        cache.len[i] = len;
    }
    return fmemopen(cache.text[i], cache.len[i], "r");
}

/* Our own cgroup path for a v1 controller (or v2 when ctl is NULL). */
static int self_path(const char *ctl, char *out, size_t cap)
{
    FILE *f = cached(0);
    char line[1024];
    int found = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctls = c1 + 1;
        int match = 0;
        if (!ctl) {
            match = *ctls == '\0';
        } else {
            char tmp[256];
            snprintf(tmp, sizeof(tmp), ",%s,", ctls);
            char want[64];
            snprintf(want, sizeof(want), ",%s,", ctl);
            match = strstr(tmp, want) != NULL;
        }
        if (match) {
            found = skd_strlcpy(out, strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1, cap) ? -1 : 0;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Mount point of a cgroup v1 hierarchy carrying ctl, or of cgroup2. */
static int find_mount(const char *ctl, char *out, size_t cap)
{
    FILE *f = cached(1);
    char line[2048];
    int found = -1;
    if (!f)
        return -1;
    while (found < 0 && fgets(line, sizeof(line), f)) {
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        char mnt[PATH_MAX], fstype[32], src[256], opts[512] = "";
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
            sscanf(sep + 3, "%31s %255s %511s", fstype, src, opts) < 2)
            continue;
        if (!ctl && strcmp(fstype, "cgroup2") == 0) {
            found = skd_strlcpy(out, mnt, cap) ? -1 : 0;
        } else if (ctl && strcmp(fstype, "cgroup") == 0) {
            char tmp[600], want[64];
            snprintf(tmp, sizeof(tmp), ",%s,", opts);
            snprintf(want, sizeof(want), ",%s,", ctl);
            if (strstr(tmp, want))
                found = skd_strlcpy(out, mnt, cap) ? -1 : 0;
        }
    }
    fclose(f);
    return found;
}

static int mkdir_ok(const char *p)
{
    return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* 1 when pid is gone: no such process, or a zombie nobody reaped yet (a
 * spawner whose server was killed waits for init to reap it). */
static int pid_gone(pid_t pid)
{
    char p[64], buf[256];
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold spaces or ')' */
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Remove what a skilld process that is gone left under parent: its
 * "<pid>" directory and the run cgroups in it (killing any process still
 * there: a sandbox whose server died). Live processes' directories are left
 * alone; an rmdir that fails (in use) is harmless. */
static void remove_runs(const char *dir);

static void reap_stale(const char *parent)
{
    DIR *d = opendir(parent);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        int64_t pid;
        char dir[PATH_MAX];
        if (skd_parse_i64(de->d_name, 1, INT_MAX, &pid) != 0 || (pid_t)pid == getpid() ||
            !pid_gone((pid_t)pid) ||
            snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name) >= (int)sizeof(dir))
            continue;
        remove_runs(dir);
    }
    if (d)
        closedir(d);
}

/* parent ("<...>/skilld") becomes "<...>/skilld/<our pid>", created, after
 * the directories of dead skilld processes are removed. */
static int own_dir(char *parent, size_t cap, int v2)
{
    size_t n = strlen(parent);
    reap_stale(parent);
    if (snprintf(parent + n, cap - n, "/%d", (int)getpid()) >= (int)(cap - n) || mkdir_ok(parent))
        return -1;
    if (v2 && skd__cg_write_file(parent, "cgroup.subtree_control", "+memory +pids +cpu"))
        return -1;
    return 0;
}

/* Move every process of from/cgroup.procs into to (all: after a systemd
 * delegation every process there is ours, the server and the spawner). */
static int move_procs(const char *from, const char *to)
{
    char p[PATH_MAX], line[32];
    int rc = 0;
    if (snprintf(p, sizeof(p), "%s/cgroup.procs", from) >= (int)sizeof(p))
        return -1;
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (skd__cg_write_file(to, "cgroup.procs", line) != 0 && errno != ESRCH)
            rc = -1;
    }
    fclose(f);
    return rc;
}

/* Enable memory, pids and cpu for base's children. A non-root cgroup that
 * holds processes cannot (no internal processes): move them into a leaf
 * "skilld-server" beside the sandboxes first, all of them when systemd
 * delegated base to us, else this process only. */
static int enable_controllers(const char *base, int delegated)
{
    if (skd__cg_write_file(base, "cgroup.subtree_control", "+memory +pids +cpu") == 0)
        return 0;
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (errno != EBUSY ||
        snprintf(skd__cg.leaf, sizeof(skd__cg.leaf), "%s/skilld-server", base) >=
            (int)sizeof(skd__cg.leaf) ||
        mkdir_ok(skd__cg.leaf))
        return -1;
    if ((delegated ? move_procs(base, skd__cg.leaf)
                   : skd__cg_write_file(skd__cg.leaf, "cgroup.procs", pid)) == 0 &&
        skd__cg_write_file(base, "cgroup.subtree_control", "+memory +pids +cpu") == 0)
        return 0;
    /* Leave base as we found it: back in, and no leaf left behind. */
    int saved = errno;
    move_procs(skd__cg.leaf, base);
    rmdir(skd__cg.leaf);
    skd__cg.leaf[0] = '\0';
    errno = saved;
    return -1;
}

static int setup_v2(void)
{
    char root[PATH_MAX], self[PATH_MAX], base[PATH_MAX], ctls[512], why[256];
    if (find_mount(NULL, root, sizeof(root)) ||
        skd__cg_read_file(root, "cgroup.controllers", ctls, sizeof(ctls)))
        return -1;
    if (!strstr(ctls, "memory") || !strstr(ctls, "pids") || !strstr(ctls, "cpu"))
        return -1;
    if (self_path(NULL, self, sizeof(self)))
        return -1;
    if (snprintf(base, sizeof(base), "%s%s", root, self) >= (int)sizeof(base))
        return -1;
    /* Under systemd the cgroup is ours only when systemd delegated it;
     * otherwise ask it for a scope that is (cgroup_delegate.c). */
    int delegated = skd__cgroup_delegated(base, self, why, sizeof(why));
    if (delegated == -2) {
        snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroups: not delegated (%s); fix: %s", why,
                 skd__cgroup_delegate_fix());
        return -2;
    }
    if (delegated == 0) {
        skd_err err = {0};
        if (skd__cgroup_delegate(why, &err)) {
            skd_strlcpy(skd__cg.why, skd_err_msg(&err), sizeof(skd__cg.why));
            return -2;
        }
        cache_drop(); /* we are in the new scope now */
        if (self_path(NULL, self, sizeof(self)) ||
            snprintf(base, sizeof(base), "%s%s", root, self) >= (int)sizeof(base)) {
            snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroups: cannot read our new cgroup");
            return -2;
        }
        delegated = 1;
    }
    skd_strlcpy(skd__cg.base, base, sizeof(skd__cg.base));
    skd__cg.base_is_root = self[0] == '\0';
    if (enable_controllers(base, delegated == 1) != 0) {
        snprintf(skd__cg.why, sizeof(skd__cg.why),
                 "cgroup v2 at %.300s: cannot enable memory, pids, cpu: %s; fix: %s", base,
                 strerror(errno), skd__cgroup_delegate_fix());
        return -2;
    }
    if (snprintf(skd__cg.parent[0], sizeof(skd__cg.parent[0]), "%s/skilld", base) >=
            (int)sizeof(skd__cg.parent[0]) ||
        mkdir_ok(skd__cg.parent[0]) ||
        skd__cg_write_file(skd__cg.parent[0], "cgroup.subtree_control", "+memory +pids +cpu") ||
        own_dir(skd__cg.parent[0], sizeof(skd__cg.parent[0]), 1)) {
        snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroup v2: cannot prepare %.300s: %s",
                 skd__cg.parent[0], strerror(errno));
        return -2;
    }
    skd__cg.has_kill = exists(skd__cg.parent[0], "cgroup.kill");
    skd__cg.version = 2;
    snprintf(skd__cg.desc, sizeof(skd__cg.desc), "v2 at %.200s", skd__cg.parent[0]);
    return 0;
}

/* v1: thaw the frozen runs of dead skilld processes first, so that the
 * other hierarchies' stale runs (reaped before the freezer's, in controller
 * order) can be killed and removed at once. */
static void thaw_stale_v1(void)
{
    char mnt[PATH_MAX], self[PATH_MAX], parent[PATH_MAX];
    if (find_mount(ctl_names[C_FREEZER], mnt, sizeof(mnt)) ||
        self_path(ctl_names[C_FREEZER], self, sizeof(self)) ||
        snprintf(parent, sizeof(parent), "%s%s/skilld", mnt, self) >= (int)sizeof(parent))
        return;
    DIR *d = opendir(parent);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        int64_t pid;
        char dir[PATH_MAX];
        if (skd_parse_i64(de->d_name, 1, INT_MAX, &pid) != 0 || (pid_t)pid == getpid() ||
            !pid_gone((pid_t)pid) ||
            snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name) >= (int)sizeof(dir))
            continue;
        DIR *r = opendir(dir);
        struct dirent *re;
        while (r && (re = readdir(r)) != NULL) {
            char run[PATH_MAX];
            if (re->d_type == DT_DIR && re->d_name[0] != '.' &&
                snprintf(run, sizeof(run), "%s/%s", dir, re->d_name) < (int)sizeof(run))
                skd__cg_write_file(run, "freezer.state", "THAWED");
        }
        if (r)
            closedir(r);
    }
    if (d)
        closedir(d);
}

static int setup_v1(void)
{
    thaw_stale_v1();
    for (int c = 0; c < C_COUNT; c++) {
        char mnt[PATH_MAX], self[PATH_MAX];
        if (find_mount(ctl_names[c], mnt, sizeof(mnt)) ||
            self_path(ctl_names[c], self, sizeof(self))) {
            if (c == C_FREEZER)
                break; /* optional: the pid namespace dies with its init anyway */
            snprintf(skd__cg.why, sizeof(skd__cg.why),
                     "no cgroup v2 with memory, pids and cpu, and no "
                     "cgroup v1 '%s' hierarchy",
                     ctl_names[c]);
            return -1;
        }
        if (snprintf(skd__cg.parent[c], sizeof(skd__cg.parent[c]), "%s%s/skilld", mnt, self) >=
                (int)sizeof(skd__cg.parent[c]) ||
            mkdir_ok(skd__cg.parent[c]) ||
            own_dir(skd__cg.parent[c], sizeof(skd__cg.parent[c]), 0)) {
            snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroup v1: cannot create %.300s: %s",
                     skd__cg.parent[c], strerror(errno));
            return -1;
        }
        skd__cg.nctl = c + 1;
    }
    skd__cg.has_memsw = exists(skd__cg.parent[C_MEMORY], "memory.memsw.limit_in_bytes");
    skd__cg.version = 1;
    snprintf(skd__cg.desc, sizeof(skd__cg.desc), "v1 (memory%s pids cpu%s)",
             skd__cg.has_memsw ? "+memsw" : "", skd__cg.nctl > C_FREEZER ? " freezer" : "");
    return 0;
}

static void setup(void)
{
    skd__cg.owner = getpid();
    cache_drop();
    if (setup_v2() == -1)
        setup_v1();
    cache_drop();
    if (skd__cg.version)
        atexit(skd__cgroup_release);
}

/* Kill and remove every run cgroup left in dir, then dir itself. */
static void remove_runs(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char run[PATH_MAX];
        if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
            snprintf(run, sizeof(run), "%s/%s", dir, de->d_name) >= (int)sizeof(run))
            continue;
        /* A spawner killed between freezing a run and thawing it (the
         * v1 kill sequence below) leaves it frozen: its processes cannot
         * die of SIGKILL until thawed, and every later spawner would wait
         * here for nothing. */
        skd__cg_write_file(run, "freezer.state", "THAWED");
        skd__cg_write_file(run, "cgroup.freeze", "0");
        for (int i = 0; i < 50 && rmdir(run) != 0 && errno == EBUSY; i++) {
            skd__cg_kill_procs(run);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

void skd__cgroup_release(void)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    if (!skd__cg.version || skd__cg.owner != getpid()) {
        pthread_mutex_unlock(&mu);
        return;
    }
    int n = skd__cg.version == 2 ? 1 : skd__cg.nctl;
    for (int c = 0; c < n; c++) {
        remove_runs(skd__cg.parent[c]); /* "<...>/skilld/<pid>" */
        char *slash = strrchr(skd__cg.parent[c], '/');
        if (slash) {
            *slash = '\0';
            rmdir(skd__cg.parent[c]); /* "<...>/skilld", unless another skilld uses it */
        }
    }
    /* v2: hand base back as we found it: controllers off (the root's are
     * not ours to touch), the processes we moved back in, the leaf gone.
     * Where another skilld still uses base, the first step fails and all
     * stays. */
    if (skd__cg.version == 2 && skd__cg.leaf[0] &&
        (skd__cg.base_is_root ||
         skd__cg_write_file(skd__cg.base, "cgroup.subtree_control", "-memory -pids -cpu") == 0) &&
        move_procs(skd__cg.leaf, skd__cg.base) == 0)
        rmdir(skd__cg.leaf);
    skd__cg.version = 0;
    snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroups released at exit");
    pthread_mutex_unlock(&mu);
}

int skd__cgroup_detect(skd_err *err)
{
    pthread_once(&once, setup);
    if (!skd__cg.version)
        return skd_err_set(err, SKD_ESANDBOX, "cgroups: %s", skd__cg.why);
    return 0;
}

const char *skd__cgroup_describe(void)
{
    pthread_once(&once, setup);
    return skd__cg.version ? skd__cg.desc : skd__cg.why;
}

/* Send SIGKILL to every pid listed in dir/cgroup.procs. */
void skd__cg_kill_procs(const char *dir)
{
    char p[PATH_MAX], line[32];
    if (snprintf(p, sizeof(p), "%s/cgroup.procs", dir) >= (int)sizeof(p))
        return;
    FILE *f = fopen(p, "re");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        int64_t pid;
        line[strcspn(line, "\n")] = '\0';
        if (skd_parse_i64(line, 2, INT_MAX, &pid) == 0)
            kill((pid_t)pid, SIGKILL);
    }
    fclose(f);
}

void skd__cgroup_forget(void)
{
    /* A forked spawner must set cgroups up for itself (its own
     * "<pid>" directory), not reuse what its parent process found. */
    memset(&skd__cg, 0, sizeof(skd__cg));
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
}
