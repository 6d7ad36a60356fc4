/*
 * `skilld doctor`: probe the kernel features the native sandbox needs and
 * report each as ok / warn / fail with what to change.
 *
 * Every probe is read-only or self-contained: /proc and /sys files, syscalls
 * called so that they fail harmlessly (clone3 with a zero size, seccomp's
 * GET_ACTION_AVAIL), a pidfd of ourselves, and one forked child that unshares
 * every namespace the native provider uses and exits, and questions to
 * systemd (which unit owns our cgroup, is it delegated). Nothing is
 * installed, mounted or written by the probes. The probes trust the kernel's answers; they report,
 * they do not decide: the native provider checks again when it runs and
 * fails closed on its own.
 */
#include "net/egress.h"
#include "skilld/doctor.h"
#include "sandbox/ws_quota.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/native/native.h"
#include "skilld/sandbox.h"
#include "skilld/util.h"

enum { OK, WARN, FAIL };
static const char *const status_name[] = {"ok", "warn", "fail"};

/* Append one check; fix is dropped when the check is ok. */
static void add(json_t *checks, const char *name, int st, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add(json_t *checks, const char *name, int st, const char *fix, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    json_t *c =
        json_pack("{s:s, s:s, s:s}", "name", name, "status", status_name[st], "detail", detail);
    if (c && st != OK && fix)
        json_object_set_new(c, "fix", json_string(fix));
    if (c)
        json_array_append_new(checks, c);
}

/* First line of a small file into buf; -1 when it cannot be read. */
static int read_line(const char *path, char *buf, size_t cap)
{
    int rc = skd_read_small(AT_FDCWD, path, 0, buf, cap, NULL);
    buf[strcspn(buf, "\n")] = '\0';
    return rc == 0 || (rc == SKD_ETOOBIG && buf[0]) ? 0 : -1;
}

static int64_t read_int(const char *path, int64_t def)
{
    char buf[64];
    int64_t v;
    if (read_line(path, buf, sizeof(buf)) < 0 || skd_parse_i64(buf, INT64_MIN, INT64_MAX, &v))
        return def;
    return v;
}

static void check_kernel(json_t *checks, json_t *report)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) == 0) {
        json_object_set_new(report, "kernel", json_string(u.release));
        char *end;
        major = (int)strtol(u.release, &end, 10);
        if (*end == '.')
            minor = (int)strtol(end + 1, NULL, 10);
    }
    int ok = major > 5 || (major == 5 && minor >= 6);
    add(checks, "kernel", ok ? OK : WARN,
        "upgrade to Linux 5.6 or later (clone3 and pidfd_open need 5.3, openat2 5.6)",
        "Linux %d.%d%s", major, minor, ok ? "" : ": older than 5.6");
}

/* Fork a child that unshares every namespace the native provider uses. */
static int probe_unshare(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        int fl = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                 CLONE_NEWUTS | CLONE_NEWCGROUP;
        _exit(unshare(fl) == 0 ? 0 : (errno & 0x7f) ? (errno & 0x7f) : 1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
}

static void check_userns(json_t *checks, int unshare_errno)
{
    int64_t max = read_int("/proc/sys/user/max_user_namespaces", -1);
    int64_t clone = read_int("/proc/sys/kernel/unprivileged_userns_clone", -1);
    int64_t aa = read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", -1);
    if (max == 0) {
        add(checks, "userns", FAIL, "sysctl -w user.max_user_namespaces=15000",
            "user.max_user_namespaces is 0: user namespaces are disabled");
        return;
    }
    int e = unshare_errno;
    if (e) {
        add(checks, "userns", FAIL,
            "enable user namespaces: sysctl -w user.max_user_namespaces=15000, "
            "kernel.unprivileged_userns_clone=1 (Debian), "
            "kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu); inside a container "
            "allow unshare in its seccomp profile",
            "unshare(user, mount, pid, net, ipc, uts, cgroup) failed: %s", strerror(e));
        return;
    }
    int restricted = getuid() != 0 && (clone == 0 || aa == 1);
    add(checks, "userns", restricted ? WARN : OK,
        "set kernel.unprivileged_userns_clone=1 / kernel.apparmor_restrict_unprivileged_userns=0 "
        "to run skilld as a non-root user",
        "user, mount, pid, net, ipc, uts and cgroup namespaces can be created "
        "(max_user_namespaces %lld%s)",
        (long long)max, clone == 0 ? ", unprivileged_userns_clone 0" : "");
}

/* Mount point of the v1 hierarchy holding controller, from mountinfo. */
static int v1_mount(const char *controller, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    while (found < 0 && fgets(line, sizeof(line), f)) {
        char *dash = strstr(line, " - cgroup ");
        if (!dash)
            continue;
        char *opts = strrchr(dash, ' ');
        if (!opts)
            continue;
        char optbuf[256];
        skd_strlcpy(optbuf, opts + 1, sizeof(optbuf));
        optbuf[strcspn(optbuf, "\n")] = '\0';
        char *save = NULL;
        for (char *o = strtok_r(optbuf, ",", &save); o; o = strtok_r(NULL, ",", &save))
            if (strcmp(o, controller) == 0)
                found = 0;
        if (found == 0) {
            char mnt[512];
            if (sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1)
                found = -1;
            else
                skd_strlcpy(out, mnt, cap);
        }
    }
    fclose(f);
    return found;
}

/* Where the v2 tree is mounted ("" when nowhere) and its controllers. */
static void v2_tree(char *mnt, size_t mcap, char *ctl, size_t ccap)
{
    mnt[0] = ctl[0] = '\0';
    static const char *const places[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/cgroup.controllers", places[i]);
        if (access(path, R_OK) == 0) {
            skd_strlcpy(mnt, places[i], mcap);
            if (read_line(path, ctl, ccap) < 0)
                ctl[0] = '\0';
            return;
        }
    }
}

static int has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

/* cgroup v2 with memory, pids and cpu: the cgroup skilld will really use
 * is the one this process is in (the spawner starts there), as the native
 * provider decides (native_cgroup.c, cgroup_delegate.c). */
static void check_v2_cgroup(json_t *checks, const char *mnt, char *deleg_why, size_t cap,
                            int *usable)
{
    char self[PATH_MAX - 300] = "", base[PATH_MAX], sub[512] = "";
    if (skd__cgroup_self(NULL, self, sizeof(self)))
        self[0] = '\0';
    if (snprintf(base, sizeof(base), "%s%s", mnt, self) >= (int)sizeof(base))
        base[0] = '\0';
    int d = skd__cgroup_delegated(base, self, deleg_why, cap);
    *usable = 1;
    if (d == 1) {
        int w = geteuid() == 0 || access(base, W_OK) == 0;
        *usable = w;
        add(checks, "cgroup_limits", w ? OK : FAIL, skd__cgroup_delegate_fix(),
            "cgroup v2 at %s is delegated to skilld with memory, pids and cpu%s", base,
            w ? "" : ", but this user cannot write it");
        snprintf(deleg_why, cap, "%.200s is delegated", base);
        return;
    }
    if (d == 0) {
        add(checks, "cgroup_limits", OK, NULL,
            "cgroup v2 at %s is not delegated (%s): skilld asks systemd for a transient scope "
            "skilld-<pid>.scope with Delegate=yes (as systemd-run --scope -p Delegate=yes)",
            base, deleg_why);
        return;
    }
    if (d == -2) {
        *usable = 0;
        add(checks, "cgroup_limits", FAIL, skd__cgroup_delegate_fix(),
            "cgroup v2 at %s is not delegated, and systemd cannot give skilld one: %s", base,
            deleg_why);
        return;
    }
    /* No systemd: the cgroup as it is, if skilld may subdivide it. */
    char p[PATH_MAX + 300];
    snprintf(p, sizeof(p), "%s/cgroup.subtree_control", base);
    (void)skd_read_small(AT_FDCWD, p, 0, sub, sizeof(sub), NULL);
    sub[strcspn(sub, "\n")] = '\0';
    int enabled = has_word(sub, "memory") && has_word(sub, "pids") && has_word(sub, "cpu");
    /* The same test as the set-up's (native_cgroup.c): skilld moves its
     * own processes into a leaf, never anyone else's. */
    char names[200] = "";
    int others = self[0] && !enabled ? skd__cgroup_foreign_procs(base, names, sizeof(names)) : 0;
    int w = geteuid() == 0 || access(p, W_OK) == 0;
    if (!w || others > 0) {
        *usable = 0;
        add(checks, "cgroup_limits", FAIL,
            !w ? skd__cgroup_delegate_fix()
               : "start skilld as the only process of its cgroup (exec it from the "
                 "supervisor's script), or in a delegated cgroup",
            "cgroup v2 at %s (no systemd): %s%s", base,
            !w ? "not writable by this user"
               : "it holds processes that are not skilld's, so skilld cannot enable memory, "
                 "pids and cpu for sandbox cgroups there (no internal processes): ",
            w ? names : "");
        snprintf(deleg_why, cap, "cgroup %.200s is not delegated to this user", base);
        return;
    }
    add(checks, "cgroup_limits", OK, NULL,
        "memory (with swap), pids and cpu can be limited below cgroup v2 at %s (no systemd%s)",
        base,
        enabled || !self[0] ? "" : "; skilld's processes move into its leaf skilld-server first");
    snprintf(deleg_why, cap, "%.200s is writable", base);
}

/* Which native modes can run here: root (started as root) and rootless
 * (an ordinary user: unprivileged user namespaces and a delegated cgroup v2
 * subtree). The mode this process would run in is checked; the other is
 * reported with what it lacks, as "warn", without failing the whole. */
static void check_modes(json_t *checks, int unshare_errno, int v2full, int v2usable,
                        const char *v2why)
{
    int root = geteuid() == 0;
    int64_t clone = read_int("/proc/sys/kernel/unprivileged_userns_clone", -1);
    int64_t aa = read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", -1);
    int64_t max = read_int("/proc/sys/user/max_user_namespaces", -1);
    add(checks, "mode_root", root ? (unshare_errno ? FAIL : OK) : WARN,
        root ? "see userns above" : "start skilld as root (skilld.service)", "%s",
        root ? (unshare_errno ? "root mode: started as root, but namespaces cannot be made"
                              : "root mode runs: started as root (idmapped workspaces; "
                                "sandbox ids from an unused range)")
             : "root mode unavailable: not started as root");
    char why[600] = "";
    const char *fix = NULL;
    if (max == 0 || clone == 0 || aa == 1 || (!root && unshare_errno)) {
        snprintf(why, sizeof(why), "unprivileged user namespaces are disabled (%s)",
                 max == 0     ? "user.max_user_namespaces=0"
                 : clone == 0 ? "kernel.unprivileged_userns_clone=0"
                 : aa == 1    ? "kernel.apparmor_restrict_unprivileged_userns=1"
                              : strerror(unshare_errno));
        fix = "sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or "
              "kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu)";
    } else if (!v2full) {
        snprintf(why, sizeof(why),
                 "cgroup v2 has no memory, pids and cpu controllers here (%s), and rootless "
                 "needs a delegated cgroup v2 subtree",
                 access("/sys/fs/cgroup/memory", F_OK) == 0
                     ? "they are on cgroup v1: a legacy or hybrid hierarchy"
                     : "they are not enabled");
        fix = "boot with systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all (pure cgroup v2)";
    } else if (!root && !v2usable) {
        snprintf(why, sizeof(why), "%s", v2why);
        fix = "run as a user service: systemctl --user start skilld-user (Delegate=yes), or "
              "systemd-run --user --scope -p Delegate=yes skilld ...";
    } else if (root && access("/run/systemd/system", F_OK) != 0) {
        snprintf(why, sizeof(why), "no systemd here to delegate a user a cgroup v2 subtree");
        fix = "give the user a delegated cgroup v2 subtree (chown a cgroup to it)";
    }
    if (why[0])
        add(checks, "mode_rootless", root ? WARN : FAIL, fix, "rootless mode unavailable: %s", why);
    else
        add(checks, "mode_rootless", OK, NULL, "%s",
            root ? "rootless mode can run here for a user with a delegated cgroup v2 subtree "
                   "(skilld-user.service, Delegate=yes) and unprivileged user namespaces"
                 : "rootless mode runs: unprivileged user namespaces and a delegated cgroup v2 "
                   "subtree");
}

/* The cgroup checks; *v2full: cgroup v2 has memory, pids and cpu;
 * *usable and why: whether skilld can use its v2 cgroup, and why not. */
static void check_cgroups(json_t *checks, int *v2full, int *usable, char *why, size_t cap)
{
    char v2[256], ctl[512], where[512];
    v2_tree(v2, sizeof(v2), ctl, sizeof(ctl));
    if (*v2)
        add(checks, "cgroup_v2", OK, NULL, "cgroup v2 at %s, controllers: %s", v2,
            *ctl ? ctl : "(none)");
    else
        add(checks, "cgroup_v2", WARN, "boot with systemd.unified_cgroup_hierarchy=1 for v2",
            "no cgroup v2 tree");
    static const char *const want[] = {"memory", "pids", "cpu"};
    char v1[256] = "", missing[128] = "";
    for (size_t i = 0; i < 3; i++) {
        int in_v1 = v1_mount(want[i], where, sizeof(where)) == 0;
        if (in_v1) {
            size_t n = strlen(v1);
            snprintf(v1 + n, sizeof(v1) - n, "%s%s", n ? ", " : "", want[i]);
        }
        if (!in_v1 && !has_word(ctl, want[i])) {
            size_t n = strlen(missing);
            snprintf(missing + n, sizeof(missing) - n, "%s%s", n ? ", " : "", want[i]);
        }
    }
    add(checks, "cgroup_v1", *v1 ? OK : (*v2 ? OK : WARN), NULL, "%s%s",
        *v1 ? "cgroup v1 controllers: " : "no cgroup v1 controllers mounted", v1);
    *v2full = *v2 && has_word(ctl, "memory") && has_word(ctl, "pids") && has_word(ctl, "cpu");
    *usable = 0;
    if (*v2full) {
        check_v2_cgroup(checks, v2, why, cap, usable);
        return;
    }
    if (*missing) {
        add(checks, "cgroup_limits", FAIL,
            "mount the missing controllers (v1) or enable them in the v2 tree "
            "(echo +memory +pids +cpu > cgroup.subtree_control)",
            "no cgroup controller for: %s; memoryLimit/pidsLimit/cpuLimit cannot be applied",
            missing);
        return;
    }
    int v1mem = v1_mount("memory", where, sizeof(where)) == 0;
    char memsw[600];
    snprintf(memsw, sizeof(memsw), "%s/memory.memsw.limit_in_bytes", where);
    if (v1mem && !has_word(ctl, "memory") && access(memsw, F_OK) != 0) {
        add(checks, "cgroup_limits", WARN, "boot with swapaccount=1 so swap can be limited",
            "memory, pids and cpu can be limited, but not swap (no memory.memsw)");
        return;
    }
    int writable = access(where, W_OK) == 0;
    add(checks, "cgroup_limits", writable ? OK : WARN,
        "run skilld as root (cgroup v1 cannot be delegated safely)",
        "memory (with swap), pids and cpu can be limited via cgroup v1 at %s%s", where,
        writable ? "" : ", but it is not writable by this user");
}

static void check_seccomp(json_t *checks)
{
    char line[128] = "";
    FILE *f = fopen("/proc/self/status", "re");
    int in_status = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "Seccomp:", 8) == 0) {
            in_status = 1;
            break;
        }
    if (f)
        fclose(f);
    unsigned action = SECCOMP_RET_KILL_PROCESS;
    long r1 = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
    action = SECCOMP_RET_ERRNO;
    long r2 = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
    int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
    if (!in_status || r1 != 0 || r2 != 0)
        add(checks, "seccomp", FAIL,
            "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER",
            "seccomp filters are not available (status line %s, GET_ACTION_AVAIL %s)",
            in_status ? "present" : "missing", r1 == 0 && r2 == 0 ? "ok" : strerror(errno));
    else
        add(checks, "seccomp", OK, NULL, "seccomp filter mode available (KILL_PROCESS, ERRNO)%s",
            mode == 2 ? "; this process already runs under a filter" : "");
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    add(checks, "no_new_privs", nnp >= 0 ? OK : FAIL, "use Linux 3.5 or later",
        "PR_SET_NO_NEW_PRIVS supported");
}

static void check_syscalls(json_t *checks)
{
    int fd = skd_openat2(AT_FDCWD, "/", O_PATH, 0, RESOLVE_NO_SYMLINKS);
    int e = errno;
    if (fd >= 0)
        close(fd);
    add(checks, "openat2", fd >= 0 ? OK : FAIL,
        "use Linux 5.6 or later; inside a container allow openat2 in its seccomp profile",
        "openat2 with RESOLVE_* %s", fd >= 0 ? "works" : strerror(e));
    /* A zero-sized clone3 is refused with EINVAL by a kernel that has it. */
    long r = syscall(SYS_clone3, NULL, 0);
    e = errno;
    add(checks, "clone3", r < 0 && e == EINVAL ? OK : FAIL,
        "use Linux 5.3 or later; inside a container allow clone3 in its seccomp profile",
        "clone3 %s", r < 0 && e == EINVAL ? "available" : strerror(e));
    long pfd = syscall(SYS_pidfd_open, getpid(), 0);
    e = errno;
    if (pfd >= 0)
        close((int)pfd);
    add(checks, "pidfd_open", pfd >= 0 ? OK : FAIL, "use Linux 5.3 or later", "pidfd_open %s",
        pfd >= 0 ? "works" : strerror(e));
}

static void check_protected(json_t *checks, const char *what)
{
    char path[96], fix[96], name[48];
    snprintf(path, sizeof(path), "/proc/sys/fs/protected_%s", what);
    snprintf(fix, sizeof(fix), "sysctl -w fs.protected_%s=1", what);
    snprintf(name, sizeof(name), "protected_%s", what);
    int64_t v = read_int(path, -1);
    add(checks, name, v >= 1 ? OK : WARN, fix, "fs.protected_%s = %lld", what, (long long)v);
}

/* Full path of prog in $PATH into out; -1 when absent. */
static int which(const char *prog, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n && snprintf(out, cap, "%.*s/%s", (int)n, path, prog) < (int)cap &&
            access(out, X_OK) == 0)
            return 0;
        path += n + (path[n] == ':');
    }
    return -1;
}

static int unix_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (skd_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)))
        return -1;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    int rc = connect(s, (struct sockaddr *)&sa, sizeof(sa));
    close(s);
    return rc;
}

static void check_engines(json_t *checks)
{
    char bin[512];
    if (which("docker", bin, sizeof(bin)) < 0) {
        add(checks, "docker", WARN, "install docker only if SKILLS_SANDBOX_RUNTIME=docker",
            "docker is not installed");
    } else {
        const char *host = getenv("DOCKER_HOST");
        const char *sock =
            host && strncmp(host, "unix://", 7) == 0 ? host + 7 : "/var/run/docker.sock";
        int up = unix_connect(sock) == 0;
        add(checks, "docker", up ? OK : WARN, "start the docker daemon (systemctl start docker)",
            "%s; daemon at %s %s", bin, sock, up ? "reachable" : "not reachable");
    }
    if (which("podman", bin, sizeof(bin)) < 0)
        add(checks, "podman", WARN, "install podman only if SKILLS_SANDBOX_RUNTIME=podman",
            "podman is not installed");
    else
        add(checks, "podman", OK, NULL, "%s", bin);
}

/* The end-to-end check: run `true` in a native sandbox with the default
 * limits (memory, pids, CPU, timeout, seccomp, namespaces) through a real
 * runner. Whatever step fails is named by the provider. */
static void check_native(json_t *checks, const skd_config *cfg)
{
    skd_config *own = NULL;
    skd_runner *r = NULL;
    skd_sandbox_result res;
    skd_err err = {0};
    memset(&res, 0, sizeof(res));
    if (!cfg && !(cfg = own = skd_config_new()))
        return;
    skd_runner_opts opts = {.runtime = "native"};
    int rc = skd_sandbox_provider_detect("native", &err);
    if (rc == 0)
        rc = skd_runner_new(cfg, &opts, &r, &err);
    const char *const argv[] = {"true", NULL};
    skd_sandbox_spec spec = {.runtime = "native", .argv = argv};
    if (rc == 0)
        rc = skd_sandbox_run(r, &spec, &res, &err);
    if (rc == 0 && res.error)
        rc = skd_err_set(&err, res.error, "%s", res.message);
    if (rc == 0 && !(res.exited && res.exit_code == 0))
        rc = skd_err_set(&err, SKD_ESANDBOX, "`true` did not exit 0 (signal %d)", res.signal);
    if (rc)
        add(checks, "native_sandbox", FAIL,
            "fix the failing checks above; run as root or with user namespaces and a writable "
            "cgroup",
            "a sandboxed `true` did not run: %s", skd_err_msg(&err));
    else
        add(checks, "native_sandbox", OK, NULL,
            "`true` ran in a native sandbox with the default limits in %lld ms",
            (long long)res.duration_ms);
    skd_sandbox_result_free(&res);
    skd_runner_free(r);
    skd_config_free(own);
}

/* The egress proxy (src/net/egress_doctor.c). */
static void check_egress(json_t *checks, const skd_config *cfg)
{
    skd_config *own = NULL;
    if (!cfg && !(cfg = own = skd_config_new()))
        return;
    char detail[400];
    skd_err err = {0};
    int rc = skd__egress_doctor(cfg, detail, sizeof(detail), &err);
    if (rc < 0)
        add(checks, "egress_proxy", FAIL,
            "networkEnabled runs would have no working proxy: check the log, or set "
            "SKILLS_SANDBOX_NETWORK_ENABLED=false",
            "the egress proxy probe failed: %s", skd_err_msg(&err));
    else
        add(checks, "egress_proxy", rc ? WARN : OK, "start skilld as root (the spawner places it)",
            "%s", detail);
    skd_config_free(own);
}

/* Which mechanism holds sandboxed code to the workspace quota
 * (src/sandbox/ws_quota.c), and whether DATA_DIR keeps its reserve. */
static void check_workspace_quota(json_t *checks, const skd_config *cfg)
{
    skd_err err = {0};
    const char *mode = cfg ? skd_config_str(cfg, "SKILLS_SANDBOX_WORKSPACE_QUOTA") : "overlay";
    if (strcmp(mode, "off") == 0)
        add(checks, "workspace_quota", WARN,
            "set SKILLS_SANDBOX_WORKSPACE_QUOTA=overlay (needs root) so sandboxes keep the quota",
            "mechanism off: sandboxed code can write past SKILLS_WORKSPACE_QUOTA_BYTES");
    else if (skd__wsq_probe(&err) != 0)
        add(checks, "workspace_quota", FAIL,
            "run as root (the spawner mounts the overlay), or set "
            "SKILLS_SANDBOX_WORKSPACE_QUOTA=off",
            "mechanism overlay unavailable: %s; runs with a writable workspace are refused",
            skd_err_msg(&err));
    else
        add(checks, "workspace_quota", OK, NULL,
            "mechanism overlay: sandbox writes go to a tmpfs of the quota's size and are "
            "committed after the run only within SKILLS_WORKSPACE_QUOTA_BYTES=%lld",
            cfg ? (long long)skd_config_int(cfg, "SKILLS_WORKSPACE_QUOTA_BYTES") : 104857600LL);
    struct statvfs v;
    const char *dir = cfg ? skd_config_str(cfg, "DATA_DIR") : "./var";
    long long reserve = cfg ? (long long)skd_config_int(cfg, "SKILLS_DATA_RESERVE_BYTES") : 0;
    if (statvfs(dir, &v) == 0) {
        long long avail = (long long)v.f_bavail * (long long)v.f_frsize;
        add(checks, "data_reserve", avail > reserve ? OK : WARN,
            avail > reserve ? NULL : "free space on DATA_DIR's filesystem",
            "DATA_DIR %s: %lld bytes free, %lld kept for the store (SKILLS_DATA_RESERVE_BYTES)",
            dir, avail, reserve);
    }
}

/* Every sandbox limit's default and ceiling (include/skilld/limits.h); a
 * default above its ceiling is a warning (runs get the ceiling). */
static void check_limits(json_t *checks, const skd_config *cfg)
{
    char line[480];
    int over = skd_sandbox_limits_describe(cfg, line, sizeof(line));
    add(checks, "sandbox_limits", over ? WARN : OK,
        "lower the default settings (SKILLS_SANDBOX_*) to their SKILLS_SANDBOX_MAX_* ceilings",
        "%s", line);
}

json_t *skd_doctor_run(const skd_config *cfg)
{
    /* Fork before anything is allocated: the child owns no heap of ours,
     * so leak checkers see nothing lost when it exits. */
    int unshare_errno = probe_unshare();
    json_t *report = json_object();
    json_t *checks = json_array();
    if (!report || !checks) {
        json_decref(report);
        json_decref(checks);
        return NULL;
    }
    check_kernel(checks, report);
    check_userns(checks, unshare_errno);
    int v2full = 0, v2usable = 0;
    char why[300] = "";
    check_cgroups(checks, &v2full, &v2usable, why, sizeof(why));
    check_modes(checks, unshare_errno, v2full, v2usable, why);
    check_seccomp(checks);
    check_syscalls(checks);
    check_protected(checks, "symlinks");
    check_protected(checks, "hardlinks");
    check_engines(checks);
    check_workspace_quota(checks, cfg);
    check_limits(checks, cfg);
    check_native(checks, cfg);
    check_egress(checks, cfg);
    int worst = OK;
    size_t i;
    json_t *c;
    json_array_foreach (checks, i, c) {
        const char *st = json_string_value(json_object_get(c, "status"));
        const char *name = json_string_value(json_object_get(c, "name"));
        /* docker and podman are optional providers: they never fail the whole. */
        int optional =
            name && (strcmp(name, "docker") == 0 || strcmp(name, "podman") == 0 ||
                     strcmp(name, "mode_root") == 0 || strcmp(name, "mode_rootless") == 0);
        if (st && strcmp(st, "fail") == 0 && worst < FAIL)
            worst = FAIL;
        else if (st && strcmp(st, "warn") == 0 && !optional && worst < WARN)
            worst = WARN;
    }
    json_object_set_new(report, "uid", json_integer((json_int_t)getuid()));
    json_object_set_new(report, "status", json_string(status_name[worst]));
    json_object_set_new(report, "checks", checks);
    return report;
}
