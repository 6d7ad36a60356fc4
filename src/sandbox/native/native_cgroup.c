/*
 * cgroup limits for native sandboxes, on cgroup v2 (memory.max,
 * memory.swap.max, pids.max, cpu.max, cgroup.kill, memory.events) and on
 * cgroup v1 (memory.limit_in_bytes, memory.memsw.limit_in_bytes, pids.max,
 * cpu.cfs_quota_us; freezer to kill; memory.oom_control for OOM). Each run
 * gets its own cgroup "<server's cgroup>/skilld/<server pid>/<run id>",
 * created before the process is started and removed after it is reaped;
 * what a crashed server left is removed by the next one. Fail closed: a limit that cannot be
 * written refuses the run.
 *
 * Trust: the files read here are the kernel's; run ids are UUIDs made by the
 * runner, so paths are never built from client text.
 */
#include "sandbox/native/native.h"

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

enum ctl { C_MEMORY, C_PIDS, C_CPU, C_FREEZER, C_COUNT };
static const char *const ctl_names[C_COUNT] = {"memory", "pids", "cpu", "freezer"};

static struct {
    int version;                    /* 0: unusable, 1, 2 */
    char parent[C_COUNT][PATH_MAX]; /* v1: per controller; v2: parent[0] */
    int nctl;                       /* v1: controllers in use (freezer optional) */
    int has_memsw;
    int has_kill; /* v2 cgroup.kill */
    char why[SKD_ERR_MSG_MAX];
    char desc[256];
    pid_t owner;         /* the process that made the cgroups below */
    char base[PATH_MAX]; /* v2: our cgroup, where "skilld" was made */
    char leaf[PATH_MAX]; /* v2: "<base>/skilld-server" when we moved there */
    int base_is_root;    /* v2: base is the root of the tree */
} G;
static pthread_once_t once = PTHREAD_ONCE_INIT;

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

static int write_file(const char *dir, const char *file, const char *val)
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
        if (len >= sizeof(cg->ahead[idx]) || write(fd, val, len) != (ssize_t)len)
            return -1;
        memcpy(cg->ahead[idx], val, len + 1);
        return 0;
    }
    int same = cg->ahead[idx][0] && strcmp(cg->ahead[idx], val) == 0;
    cg->ahead[idx][0] = '\0';
    if (fd < 0)
        return same ? 0 : write_file(dir, file, val);
    cg->lim_fd[idx] = -1;
    ssize_t n = same ? (ssize_t)len : write(fd, val, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)len ? 0 : -1;
}

static int read_file(const char *dir, const char *file, char *buf, size_t cap)
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

static void kill_procs(const char *dir);

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
    if (v2 && write_file(parent, "cgroup.subtree_control", "+memory +pids +cpu"))
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
        if (write_file(to, "cgroup.procs", line) != 0 && errno != ESRCH)
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
 * else's is named in G.why and refuses the set-up (-2). G.leaf is already
 * set when we are in the leaf (an earlier set-up of this process tree). */
static int enable_controllers(const char *base, int delegated)
{
    static const char ctls[] = "+memory +pids +cpu";
    if (write_file(base, "cgroup.subtree_control", ctls) == 0)
        return 0;
    char names[200];
    int busy = errno == EBUSY, made = 0;
    int n = busy && delegated != 1 ? skd__cgroup_foreign_procs(base, names, sizeof(names)) : 0;
    if (n > 0) {
        snprintf(G.why, sizeof(G.why),
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
    if (!G.leaf[0]) {
        if (snprintf(G.leaf, sizeof(G.leaf), "%s/skilld-server", base) >= (int)sizeof(G.leaf) ||
            mkdir_ok(G.leaf))
            return -1;
        made = 1;
    }
    /* A process forked in base meanwhile makes the enable fail: again. */
    for (int i = 0; i < 3; i++)
        if (move_procs(base, G.leaf) == 0 && write_file(base, "cgroup.subtree_control", ctls) == 0)
            return 0;
    /* Leave base as we found it: back in, and no leaf left behind. */
    int saved = errno;
    if (made) {
        move_procs(G.leaf, base);
        rmdir(G.leaf);
        G.leaf[0] = '\0';
    }
    errno = saved;
    return -1;
}

/* Our cgroup, below the v2 mount root, into self ("" for the root). When
 * an earlier set-up of this process tree moved us into its leaf
 * "skilld-server", the leaf's parent is ours and the leaf is G.leaf. */
static int own_cgroup(const char *root, char *self, size_t cap)
{
    static const char leaf[] = "/skilld-server";
    G.leaf[0] = '\0';
    if (self_path(NULL, self, cap))
        return -1;
    size_t n = strlen(self), k = sizeof(leaf) - 1;
    if (n >= k && strcmp(self + n - k, leaf) == 0) {
        if (snprintf(G.leaf, sizeof(G.leaf), "%s%s", root, self) >= (int)sizeof(G.leaf))
            return -1;
        self[n - k] = '\0';
    }
    return 0;
}

static int setup_v2(void)
{
    char root[PATH_MAX], self[PATH_MAX], base[PATH_MAX], ctls[512], why[256];
    if (find_mount(NULL, root, sizeof(root)) ||
        read_file(root, "cgroup.controllers", ctls, sizeof(ctls)))
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
        snprintf(G.why, sizeof(G.why), "cgroups: not delegated (%s); fix: %s", why,
                 skd__cgroup_delegate_fix());
        return -2;
    }
    if (delegated == 0) {
        skd_err err = {0};
        if (skd__cgroup_delegate(why, &err)) {
            skd_strlcpy(G.why, skd_err_msg(&err), sizeof(G.why));
            return -2;
        }
        cache_drop(); /* we are in the new scope now */
        if (own_cgroup(root, self, sizeof(self)) ||
            snprintf(base, sizeof(base), "%s%s", root, self) >= (int)sizeof(base)) {
            snprintf(G.why, sizeof(G.why), "cgroups: cannot read our new cgroup");
            return -2;
        }
        delegated = 1;
    }
    skd_strlcpy(G.base, base, sizeof(G.base));
    G.base_is_root = self[0] == '\0';
    int en = enable_controllers(base, delegated);
    if (en == -2)
        return -2;
    if (en != 0) {
        snprintf(G.why, sizeof(G.why),
                 "cgroup v2 at %.300s: cannot enable memory, pids, cpu: %s; fix: %s", base,
                 strerror(errno), skd__cgroup_delegate_fix());
        return -2;
    }
    if (snprintf(G.parent[0], sizeof(G.parent[0]), "%s/skilld", base) >= (int)sizeof(G.parent[0]) ||
        mkdir_ok(G.parent[0]) ||
        write_file(G.parent[0], "cgroup.subtree_control", "+memory +pids +cpu") ||
        own_dir(G.parent[0], sizeof(G.parent[0]), 1)) {
        snprintf(G.why, sizeof(G.why), "cgroup v2: cannot prepare %.300s: %s", G.parent[0],
                 strerror(errno));
        return -2;
    }
    G.has_kill = exists(G.parent[0], "cgroup.kill");
    G.version = 2;
    snprintf(G.desc, sizeof(G.desc), "v2 at %.200s", G.parent[0]);
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
                write_file(run, "freezer.state", "THAWED");
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
            snprintf(G.why, sizeof(G.why),
                     "no cgroup v2 with memory, pids and cpu, and no "
                     "cgroup v1 '%s' hierarchy",
                     ctl_names[c]);
            return -1;
        }
        if (snprintf(G.parent[c], sizeof(G.parent[c]), "%s%s/skilld", mnt, self) >=
                (int)sizeof(G.parent[c]) ||
            mkdir_ok(G.parent[c]) || own_dir(G.parent[c], sizeof(G.parent[c]), 0)) {
            snprintf(G.why, sizeof(G.why), "cgroup v1: cannot create %.300s: %s", G.parent[c],
                     strerror(errno));
            return -1;
        }
        G.nctl = c + 1;
    }
    G.has_memsw = exists(G.parent[C_MEMORY], "memory.memsw.limit_in_bytes");
    G.version = 1;
    snprintf(G.desc, sizeof(G.desc), "v1 (memory%s pids cpu%s)", G.has_memsw ? "+memsw" : "",
             G.nctl > C_FREEZER ? " freezer" : "");
    return 0;
}

static void setup(void)
{
    G.owner = getpid();
    cache_drop();
    if (setup_v2() == -1)
        setup_v1();
    cache_drop();
    if (G.version)
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
        write_file(run, "freezer.state", "THAWED");
        write_file(run, "cgroup.freeze", "0");
        for (int i = 0; i < 50 && rmdir(run) != 0 && errno == EBUSY; i++) {
            kill_procs(run);
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
    if (!G.version || G.owner != getpid()) {
        pthread_mutex_unlock(&mu);
        return;
    }
    int n = G.version == 2 ? 1 : G.nctl;
    for (int c = 0; c < n; c++) {
        remove_runs(G.parent[c]); /* "<...>/skilld/<pid>" */
        char *slash = strrchr(G.parent[c], '/');
        if (slash) {
            *slash = '\0';
            rmdir(G.parent[c]); /* "<...>/skilld", unless another skilld uses it */
        }
    }
    /* v2: hand base back as we found it: controllers off (the root's are
     * not ours to touch), the processes we moved back in, the leaf gone.
     * Where another skilld still uses base, the first step fails and all
     * stays. */
    if (G.version == 2 && G.leaf[0] &&
        (G.base_is_root ||
         write_file(G.base, "cgroup.subtree_control", "-memory -pids -cpu") == 0) &&
        move_procs(G.leaf, G.base) == 0)
        rmdir(G.leaf);
    G.version = 0;
    snprintf(G.why, sizeof(G.why), "cgroups released at exit");
    pthread_mutex_unlock(&mu);
}

int skd__cgroup_detect(skd_err *err)
{
    pthread_once(&once, setup);
    if (!G.version)
        return skd_err_set(err, SKD_ESANDBOX, "cgroups: %s", G.why);
    return 0;
}

const char *skd__cgroup_describe(void)
{
    pthread_once(&once, setup);
    return G.version ? G.desc : G.why;
}

/* 1 when the machine has swap that memory limits without memsw would miss. */
static int swap_present(void)
{
    char buf[512];
    if (read_file("/proc", "swaps", buf, sizeof(buf)))
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
    int memsw_first = G.has_memsw && !cg->ahead_mode && cg->ahead[L_MEMSW][0] &&
                      strtoll(cg->ahead[L_MEMSW], NULL, 10) < (long long)cfg->memory_limit << 20;
    if (memsw_first &&
        (*step = "memory.memsw.limit_in_bytes",
         write_limit(cg, L_MEMSW, cg->dir[C_MEMORY], "memory.memsw.limit_in_bytes", v)))
        return -1;
    if (*step = "memory.limit_in_bytes",
        write_limit(cg, L_MEM, cg->dir[C_MEMORY], "memory.limit_in_bytes", v))
        return -1;
    if (G.has_memsw) {
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
    int n = G.version == 2 ? 1 : G.nctl;
    const char *step = "mkdir";
    for (int c = 0; c < n; c++) {
        if (snprintf(cg->dir[c], sizeof(cg->dir[c]), "%s/%s", G.parent[c], id) >=
                (int)sizeof(cg->dir[c]) ||
            mkdir(cg->dir[c], 0755) != 0)
            goto fail;
        cg->n = c + 1;
    }
    if (G.version == 2 &&
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
    if ((G.version == 2 ? limits_v2 : limits_v1)(cg, cfg, &step) == 0)
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
    (void)(G.version == 2 ? limits_v2 : limits_v1)(cg, cfg, &step);
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
        const char *file = G.version == 2 ? v2[i] : v1[i];
        const char *dir = cg->dir[G.version == 2 ? 0 : v1_ctl[i]];
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
        snprintf(p, sizeof(p), "%s/%s", cg->dir[G.version == 2 ? 0 : C_MEMORY],
                 G.version == 2 ? "memory.events" : "memory.oom_control") < (int)sizeof(p))
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
    if (G.version != 1)
        return 0;
    for (int c = 0; c < cg->n; c++) {
        char p[PATH_MAX];
        int fd = -1;
        if (c >= cap || snprintf(p, sizeof(p), "%s/tasks", cg->dir[c]) >= (int)sizeof(p) ||
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

/* Send SIGKILL to every pid listed in dir/cgroup.procs. */
static void kill_procs(const char *dir)
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

void skd__cgroup_kill(skd__cgroup *cg)
{
    if (!cg || !cg->n)
        return;
    if (G.version == 2 && G.has_kill && write_file(cg->dir[0], "cgroup.kill", "1") == 0)
        return;
    /* No freezer: every process of a run is in the pid namespace whose init
     * native_kill has just sent SIGKILL, and the kernel kills the whole
     * namespace with its init (no fork outruns that: the namespace takes
     * no new pid once its init is dying). This kill of what the cgroup
     * lists is a second net. Freezing first would open a window in which
     * our own death (the parent-death signal of a killed server, arriving
     * during shutdown) leaves the run frozen for good, with SIGKILL
     * pending and its memory held, until another skilld thaws it. */
    kill_procs(cg->dir[G.version == 2 ? 0 : C_PIDS]);
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
    if (read_file(dir, file, buf, sizeof(buf)))
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
    if (G.version == 2)
        return oom_count(cg, cg->dir[0], "memory.events") > 0;
    long long n = oom_count(cg, cg->dir[C_MEMORY], "memory.oom_control");
    if (n >= 0)
        return n > 0;
    char buf[64];
    if (read_file(cg->dir[C_MEMORY], "memory.failcnt", buf, sizeof(buf)))
        return 0;
    return strtoll(buf, NULL, 10) > 0;
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

void skd__cgroup_forget(void)
{
    /* A forked spawner must set cgroups up for itself (its own
     * "<pid>" directory), not reuse what its parent process found. */
    memset(&G, 0, sizeof(G));
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
}
