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

static const char *const ctl_names[C_COUNT] = {"memory", "pids", "cpu", "freezer", "cpuacct"};

struct skd__cg_tree skd__cg;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dir/file, or -1 with ENAMETOOLONG. */
static int join(char *p, const char *dir, const char *file)
{
    if (snprintf(p, PATH_MAX, "%s/%s", dir, file) < PATH_MAX)
        return 0;
    errno = ENAMETOOLONG;
    return -1;
}

int skd__cg_write_file(const char *dir, const char *file, const char *val)
{
    char p[PATH_MAX];
    return join(p, dir, file) || skd_write_small(AT_FDCWD, p, 0, val) ? -1 : 0;
}

int skd__cg_read_file(const char *dir, const char *file, char *buf, size_t cap)
{
    char p[PATH_MAX];
    return join(p, dir, file) || skd_read_small(AT_FDCWD, p, 0, buf, cap, NULL) ? -1 : 0;
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

#define PROC_MAX (4 << 20) /* a host with thousands of mounts stays below */

/* The text of file i (0: /proc/self/cgroup, 1: /proc/self/mountinfo),
 * NUL-terminated, or NULL. */
static const char *cached_text(int i)
{
    static const char *const names[2] = {"/proc/self/cgroup", "/proc/self/mountinfo"};
    if (!cache.text[i]) {
        char *buf;
        size_t len;
        if (skd_read_alloc(AT_FDCWD, names[i], 0, PROC_MAX, &buf, &len))
            return NULL;
        if (!len) {
            free(buf);
            return NULL;
        }
        cache.text[i] = buf;
        cache.len[i] = len;
    }
    return cache.text[i];
}

/* A stream of file i. */
static FILE *cached(int i)
{
    return cached_text(i) ? fmemopen(cache.text[i], cache.len[i], "r") : NULL;
}

int skd__cgroup_parse_self(const char *text, const char *ctl, char *out, size_t cap)
{
    for (const char *l = text; l && *l;) {
        size_t n = strcspn(l, "\n");
        char line[PATH_MAX + 256];
        const char *next = l[n] ? l + n + 1 : NULL;
        if (n >= sizeof(line)) {
            l = next;
            continue;
        }
        memcpy(line, l, n);
        line[n] = '\0';
        l = next;
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
        if (match)
            return skd_strlcpy(out, strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1, cap) ? -1 : 0;
    }
    return -1;
}

int skd__cgroup_self(const char *ctl, char *out, size_t cap)
{
    char *text;
    if (skd_read_alloc(AT_FDCWD, "/proc/self/cgroup", 0, PROC_MAX, &text, NULL))
        return -1;
    int rc = skd__cgroup_parse_self(text, ctl, out, cap);
    free(text);
    return rc;
}

/* Our own cgroup path for a v1 controller (or v2 when ctl is NULL), as
 * /proc/self/cgroup said when it was read last. */
static int self_path(const char *ctl, char *out, size_t cap)
{
    const char *text = cached_text(0);
    return text ? skd__cgroup_parse_self(text, ctl, out, cap) : -1;
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
    char p[64], buf[1024]; /* a stat line is about 300 bytes */
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    int rc = skd_read_small(AT_FDCWD, p, 0, buf, sizeof(buf), NULL);
    if (rc || !buf[0])
        return rc == SKD_ENOENT;
    const char *rp = strrchr(buf, ')'); /* the name may hold spaces or ')' */
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Remove a "<pid>" directory and the run cgroups in it (killing any
 * process still there: a sandbox whose server died); an rmdir that fails
 * (in use) is harmless. */
static void remove_runs(const char *dir);

/* Call fn on the "<pid>" directory under parent of each skilld process
 * that is gone; live processes' directories are left alone. */
static void for_each_stale(const char *parent, void (*fn)(const char *dir))
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
        fn(dir);
    }
    if (d)
        closedir(d);
}

/* parent ("<...>/skilld") becomes "<...>/skilld/<our pid>", created, after
 * the directories of dead skilld processes are removed. */
static int own_dir(char *parent, size_t cap, int v2)
{
    size_t n = strlen(parent);
    for_each_stale(parent, remove_runs);
    if (snprintf(parent + n, cap - n, "/%d", (int)getpid()) >= (int)(cap - n) || mkdir_ok(parent))
        return -1;
    if (v2 && skd__cg_write_file(parent, "cgroup.subtree_control", "+memory +pids +cpu"))
        return -1;
    return 0;
}

/* Move every process of from/cgroup.procs into to. */
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
 * holds processes cannot (no internal processes): move them into the leaf
 * "skilld-server" beside the sandboxes first. All of them, the server, its
 * zygote and spawner too, or the controllers could not be enabled: when
 * systemd delegated base to us every process in it is ours; without
 * systemd each must be skilld's (skd__cgroup_foreign_procs), and anyone
 * else's is named in skd__cg.why and refuses the set-up (-2). skd__cg.leaf is
 * set when we are in the leaf (an earlier set-up of this process tree). */
static int enable_controllers(const char *base, int delegated)
{
    static const char ctls[] = "+memory +pids +cpu";
    if (skd__cg_write_file(base, "cgroup.subtree_control", ctls) == 0)
        return 0;
    char names[200];
    int busy = errno == EBUSY, made = 0;
    int n = busy && delegated != 1 ? skd__cgroup_foreign_procs(base, names, sizeof(names)) : 0;
    if (n > 0) {
        snprintf(skd__cg.why, sizeof(skd__cg.why),
                 "cgroup v2 at %.120s holds processes that are not skilld's: %.120s (skilld "
                 "moves only its own into a leaf to enable memory, pids, cpu: no internal "
                 "processes); fix: start skilld alone in its cgroup (exec it from the "
                 "supervisor's script), or in a delegated cgroup",
                 base, names);
        return -2;
    }
    if (!busy || n < 0) {
        if (busy)
            errno = EBUSY;
        return -1;
    }
    if (!skd__cg.leaf[0]) {
        if (snprintf(skd__cg.leaf, sizeof(skd__cg.leaf), "%s/skilld-server", base) >=
                (int)sizeof(skd__cg.leaf) ||
            mkdir_ok(skd__cg.leaf))
            return -1;
        made = 1;
    }
    /* A process forked in base meanwhile makes the enable fail: again. */
    for (int i = 0; i < 3; i++)
        if (move_procs(base, skd__cg.leaf) == 0 &&
            skd__cg_write_file(base, "cgroup.subtree_control", ctls) == 0)
            return 0;
    /* Leave base as we found it: back in, and no leaf left behind. */
    int saved = errno;
    if (made) {
        move_procs(skd__cg.leaf, base);
        rmdir(skd__cg.leaf);
        skd__cg.leaf[0] = '\0';
    }
    errno = saved;
    return -1;
}

/* Our cgroup, below the v2 mount root, into self ("" for the root). When
 * an earlier set-up of this process tree moved us into its leaf
 * "skilld-server", the leaf's parent is ours and the leaf is skd__cg.leaf. */
static int own_cgroup(const char *root, char *self, size_t cap)
{
    static const char leaf[] = "/skilld-server";
    skd__cg.leaf[0] = '\0';
    if (self_path(NULL, self, cap))
        return -1;
    size_t n = strlen(self), k = sizeof(leaf) - 1;
    if (n >= k && strcmp(self + n - k, leaf) == 0) {
        if (snprintf(skd__cg.leaf, sizeof(skd__cg.leaf), "%s%s", root, self) >=
            (int)sizeof(skd__cg.leaf))
            return -1;
        self[n - k] = '\0';
    }
    return 0;
}

static int setup_v2(void)
{
    char root[PATH_MAX], self[PATH_MAX], base[PATH_MAX], ctls[512], why[256];
    if (find_mount(NULL, root, sizeof(root)) ||
        skd__cg_read_file(root, "cgroup.controllers", ctls, sizeof(ctls)))
        return -1;
    if (!strstr(ctls, "memory") || !strstr(ctls, "pids") || !strstr(ctls, "cpu"))
        return -1;
    if (own_cgroup(root, self, sizeof(self)) ||
        snprintf(base, sizeof(base), "%s%s", root, self) >= (int)sizeof(base))
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
        if (own_cgroup(root, self, sizeof(self)) ||
            snprintf(base, sizeof(base), "%s%s", root, self) >= (int)sizeof(base)) {
            snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroups: cannot read our new cgroup");
            return -2;
        }
        delegated = 1;
    }
    skd_strlcpy(skd__cg.base, base, sizeof(skd__cg.base));
    skd__cg.base_is_root = self[0] == '\0';
    int en = enable_controllers(base, delegated);
    if (en == -2)
        return -2;
    if (en != 0) {
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

/* Thaw every run cgroup under dir. */
static void thaw_runs(const char *dir)
{
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
    for_each_stale(parent, thaw_runs);
}

static int setup_v1(void)
{
    thaw_stale_v1();
    for (int c = 0; c < C_COUNT; c++) {
        char mnt[PATH_MAX], self[PATH_MAX];
        skd__cg.parent[c][0] = '\0';
        if (find_mount(ctl_names[c], mnt, sizeof(mnt)) ||
            self_path(ctl_names[c], self, sizeof(self))) {
            /* freezer: the pid namespace dies with its init anyway;
             * cpuacct: only metering (a run's CPU time) goes without it. */
            if (c == C_FREEZER || c == C_CPUACCT)
                continue;
            snprintf(skd__cg.why, sizeof(skd__cg.why),
                     "no cgroup v2 with memory, pids and cpu, and no "
                     "cgroup v1 '%s' hierarchy",
                     ctl_names[c]);
            return -1;
        }
        char parent[PATH_MAX];
        if (snprintf(parent, sizeof(parent), "%s%s/skilld", mnt, self) >= (int)sizeof(parent)) {
            snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroup v1: %s path too long", ctl_names[c]);
            return -1;
        }
        /* cpuacct mounted together with cpu ("cpu,cpuacct"): the run's cpu
         * directory has its files, and a second directory could not be made. */
        size_t pl = strlen(parent);
        if (c == C_CPUACCT && strncmp(parent, skd__cg.parent[C_CPU], pl) == 0 &&
            skd__cg.parent[C_CPU][pl] == '/')
            continue;
        memcpy(skd__cg.parent[c], parent, pl + 1);
        if (mkdir_ok(skd__cg.parent[c]) ||
            own_dir(skd__cg.parent[c], sizeof(skd__cg.parent[c]), 0)) {
            snprintf(skd__cg.why, sizeof(skd__cg.why), "cgroup v1: cannot create %.300s: %s",
                     skd__cg.parent[c], strerror(errno));
            return -1;
        }
    }
    skd__cg.nctl = C_COUNT;
    skd__cg.has_memsw = exists(skd__cg.parent[C_MEMORY], "memory.memsw.limit_in_bytes");
    skd__cg.version = 1;
    snprintf(skd__cg.desc, sizeof(skd__cg.desc), "v1 (memory%s pids cpu%s%s)",
             skd__cg.has_memsw ? "+memsw" : "", skd__cg.parent[C_FREEZER][0] ? " freezer" : "",
             skd__cg.parent[C_CPUACCT][0] ? " cpuacct" : "");
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
        if (!skd__cg.parent[c][0]) /* a v1 controller not in use */
            continue;
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
